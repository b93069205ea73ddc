// The Hopper prefill kernel at head size 128 with whole K/V tiles of paged caches loaded by
// the copy engine when a box holds at least 64 keys (blocks of 64 keys or more), and by
// cp.async in passes of 16 keys otherwise.
#define ATTNKIT_FLASH_WGMMA_D128 128, 128, 3, true, true, 64
