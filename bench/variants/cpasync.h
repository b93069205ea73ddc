// The Hopper prefill kernel with every K/V tile copied by cp.async (no copy-engine loads),
// as before the tensor maps: for timing against the default.
#define ATTNKIT_FLASH_WGMMA_TMA 0
