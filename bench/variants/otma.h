// The Hopper prefill consumers store whole output tiles with the copy engine
// (flash_wgmma.cu, add_row_maps).
#define ATTNKIT_FLASH_WGMMA_OUT_TMA 1
