// The folded cache write stores the copy engine's own-key tiles with the copy engine
// (flash_wgmma_producer.cuh, store_own_passes).
#define ATTNKIT_FLASH_WGMMA_WRITE_TMA 1
