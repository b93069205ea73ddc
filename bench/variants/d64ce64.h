// The Hopper prefill kernel at head size 64 with the copy engine only for boxes of 64 keys
// or more (blocks of 64 keys or larger), whole tiles of smaller blocks by cp.async in passes
// of 16 keys.
#define ATTNKIT_FLASH_WGMMA_D64 64, 128, 4, true, true, 64
