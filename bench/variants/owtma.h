// The output and the folded cache write by the copy engine (otma.h and wtma.h together).
#define ATTNKIT_FLASH_WGMMA_OUT_TMA 1
#define ATTNKIT_FLASH_WGMMA_WRITE_TMA 1
