// CUDA_FLASH's Hopper prefill kernels with a watchdog in every mbarrier wait
// (wgmma_primitives.cuh): a wait that lasts 4e9 clock cycles (about 2 s) prints the block,
// thread, barrier address and parity, then traps. For finding where a build deadlocks
// (run 64); the clock reads in the wait loops make it no build to time.
#define ATTNKIT_WGMMA_WATCHDOG 1
