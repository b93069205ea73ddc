// Steps with prefill (large-row) items fold their cache update into the Hopper prefill
// kernels (their producer reads the step's own keys from the inputs and writes its tokens'
// rows into the cache) instead of a separate cache-update launch before the attention.
#define ATTNKIT_FLASH_FOLD_PREFILL_WRITE 1
