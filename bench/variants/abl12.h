// Timing ablation 12 of the Hopper prefill kernel (flash_wgmma_kernel.cuh): wrong
// results, for measuring what the dropped work costs.
#define ATTNKIT_FLASH_WGMMA_ABLATE 12
