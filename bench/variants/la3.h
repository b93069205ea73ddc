// Block-table lookups 3 key tiles ahead of the copies that use them, each issued before its
// iteration's copies (ATTNKIT_FLASH_BLOCK_LOOKAHEAD in flash_kernel.cuh).
// Run 60 (H100): x1.003-1.006 on fp8, x1.011-1.016 on d256/d64, x0.997-1.012 on 16-bit d128: not
// kept.
#define ATTNKIT_FLASH_BLOCK_LOOKAHEAD 3
