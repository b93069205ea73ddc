// The folded cache write stores every own key by the producer threads' 16-byte stores, none
// by the copy engine (flash_wgmma_producer.cuh, store_own_passes).
#define ATTNKIT_FLASH_WGMMA_WRITE_TMA 0
