// The Hopper prefill kernel with every K/V tile copied by cp.async: head size 64's
// configuration without the copy engine (the other head sizes have none), for timing
// against the default.
#define ATTNKIT_FLASH_WGMMA_D64 64, 128, 4, true, false
