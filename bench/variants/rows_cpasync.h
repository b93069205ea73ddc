// The step's own keys and Q by cp.async, as before run 83 (flash_wgmma.cu,
// add_input_maps and add_row_maps; for comparisons).
#define ATTNKIT_FLASH_WGMMA_FRESH_TMA 0
#define ATTNKIT_FLASH_WGMMA_Q_TMA 0
