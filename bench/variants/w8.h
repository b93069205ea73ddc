// fp8 head-size-128 decode with 8 warps x 16 keys of 128-key tiles at one CTA per SM:
// 6 stages (196 KiB of shared memory), half the CTAs of the default per split-KV wave.
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 8, 128, 6, true, 1, 8
