// fp8 head-size-128 decode with 2 threads per key row (4 of its 8 chunks each): a quarter
// of the default's loader passes; each cp.async instruction of a warp then reads one
// 32-byte sector of each of 16 rows. Run 59 (H100): x1.14-1.15 on the fp8 shapes.
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 4, 128, 3, true, 2, 2
