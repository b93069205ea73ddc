// fp8 head-size-128 decode with 4 threads per key row (2 of its 8 chunks each) instead of
// 8: half the loader passes per tile, so half the block-table lookups and address
// arithmetic per byte (the loop body 1287 -> 999 SASS instructions; 202 registers).
// Run 59 (H100): x1.011-1.027 the default's time on the fp8 shapes: not kept.
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 4, 128, 3, true, 2, 4
