// fp8 head-size-128 decode with 128-key tiles: 4 warps of 32 keys, 3 stages (100 KiB of
// shared memory per CTA), 2 CTAs per SM. The default since it was measured x0.979 against
// 64-key tiles in 6 stages (kv64x6.h).
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 4, 128, 3, true, 2, 8
