// The Hopper prefill kernel over fp8 caches at head size 128 with 64-key tiles: four
// 16-bit stages beside two fp8 staging buffers (193 KiB) where the default has two stages
// of 128 keys (225 KiB), so that more tiles are converted ahead of the consumers.
#define ATTNKIT_FLASH_WGMMA_FP8_D128 128, 64, 4, true, false, 8, 2
