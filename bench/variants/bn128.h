// fp8 head-size-128 decode with 128-key tiles: 4 warps of 32 keys, 3 stages (100 KiB of
// shared memory per CTA), 2 CTAs per SM.
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 4, 128, 3, true, 2, 8
