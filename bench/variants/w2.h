// fp8 head-size-128 decode with two warps of 64 keys per 128-key tile, 3 stages (100 KiB of
// shared memory per CTA), 2 CTAs per SM: half the threads per CTA, each warp's softmax
// step covering twice the keys.
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 2, 128, 3, true, 2, 8
