// Block-table lookups 2 key tiles ahead of the copies that use them, each issued before its
// iteration's copies (ATTNKIT_FLASH_BLOCK_LOOKAHEAD in flash_kernel.cuh).
// Run 60 (H100): x1.011-1.028 on fp8, x1.005-1.011 on d256/d64, x0.998-1.011 on 16-bit d128: not
// kept.
#define ATTNKIT_FLASH_BLOCK_LOOKAHEAD 2
