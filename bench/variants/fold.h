// Steps with prefill (large-row) items fold their cache update into the Hopper prefill
// kernels (their producer reads the step's own keys from the inputs and writes its tokens'
// rows into the cache) instead of a separate cache-update launch before the attention.
// Run 62 (H100): correct, x0.995 the default's time at (8,2048) d128 and x1.01 at (2,8192)
// d256: not the default.
#define ATTNKIT_FLASH_FOLD_PREFILL_WRITE 1
