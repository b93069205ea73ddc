// fp8 head-size-128 decode as it ran before 128-key tiles became the default: 64-key tiles
// (4 warps of 16 keys) in 6 stages (100 KiB of shared memory per CTA), 2 CTAs per SM; the
// same kernel that FlashKvConfig made of the 16-bit configuration with its stages doubled.
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 4, 64, 6, true, 2, 8
