// Steps with prefill (large-row) items keep the separate cache-update launch before the
// attention launch, as before the Hopper prefill kernels wrote the cache themselves.
#define ATTNKIT_FLASH_FOLD_PREFILL_WRITE 0
