// c3.h and thr8.h together.
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 4, 64, 4, true, 3, 8
#define ATTNKIT_FLASH_RESCALE_THRESHOLD 8.0f
