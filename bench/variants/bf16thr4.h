// 16-bit head-size-128 decode with 4 threads per key row (4 of its 16 chunks each) instead
// of 8: half the loader passes per tile; each cp.async instruction of a warp then reads 64
// bytes (half a line) of each of 8 rows. Run 59 (H100): x1.02-1.03 on the 16-bit shapes.
#define ATTNKIT_FLASH_DECODE_D128 128, 1, 1, 4, 64, 3, true, 2, 4
