// The Hopper prefill kernel at head size 64 with six 16-bit stages of 128 keys (208 KiB of
// shared memory) where the default has four (144 KiB), whole tiles still by the copy engine.
#define ATTNKIT_FLASH_WGMMA_D64 64, 128, 6, true, true
