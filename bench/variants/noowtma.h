// Neither the output nor the folded cache write by the copy engine (nootma.h and nowtma.h
// together): the prefill's stores as before run 86.
#define ATTNKIT_FLASH_WGMMA_OUT_TMA 0
#define ATTNKIT_FLASH_WGMMA_WRITE_TMA 0
