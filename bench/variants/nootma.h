// The Hopper prefill consumers store the output as 16-byte rows, not whole tiles by the copy
// engine (flash_wgmma.cu, add_row_maps).
#define ATTNKIT_FLASH_WGMMA_OUT_TMA 0
