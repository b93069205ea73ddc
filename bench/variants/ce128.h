// The Hopper prefill kernel at head size 128 with whole K/V tiles of paged caches loaded by
// the copy engine (as at head size 64), for timing against the default's cp.async.
#define ATTNKIT_FLASH_WGMMA_D128 128, 128, 3, true, true
