#pragma once
// The separate cache-update launch before the Hopper prefill kernels (as before they wrote
// the cache themselves), for comparisons.
#define ATTNKIT_FLASH_FOLD_PREFILL_WRITE 0
