// fp8 head-size-128 decode with 128-key tiles in 6 stages at one CTA per SM (196 KiB of
// shared memory per CTA): the default's tiles, twice its stages per CTA, half the CTAs of
// a split-KV wave.
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 4, 128, 6, true, 1, 8
