// fp8 head-size-128 decode at 3 CTAs per SM: 4 stages of 64-key tiles (68 KiB of shared
// memory per CTA), registers capped at 168 by __launch_bounds__.
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 4, 64, 4, true, 3, 8
