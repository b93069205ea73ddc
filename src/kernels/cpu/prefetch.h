#pragma once
// A software prefetch of one cache line into L2 that the optimizer keeps.
//
// GCC treats __builtin_prefetch as free of side effects: a function whose only effect is
// prefetching (a loop over a row's lines, say) is found "looping pure" by its IPA pure-const
// analysis, and a call to it, having no result that is used, is then deleted. The CPU_FLASH
// kernels lost every prefetch that sat in such a helper this way, silently (GCC 12, -O1 and
// above). An asm volatile statement is never deleted, wherever it is inlined. The address
// goes in a register, not as a memory operand: an "m" operand of a char tells the compiler
// the statement reads memory that may alias anything, so every pending store is written out
// before it (the AVX-512 mixed prefill/decode step of bench/cpu_attention_bench ran 28%
// slower that way).

namespace attnkit::cpu {

inline void prefetch_l2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 (%0)" : : "r"(p));
#else
  __builtin_prefetch(p, 0, 2);
  asm volatile("" : : "r"(p));  // the same guard: the function is no longer pure
#endif
}

// Key tiles ahead that CPU_FLASH's decode loops prefetch: 1 on Intel CPUs and AMD Zen 3, 2
// on others, each the best measured on its machine (bench/results/cpu_flash.md,
// cpu_flash_avx2.md): on a Zen 4 machine 4 among 1, 2, 4, 6 and 8 in an early round (1 and 2
// left the strided NHD case waiting), then, with the kernels of 2026-12-07 (head packing,
// 16-key tiles, prefetches spread through the loops), 2 against 4 x1.01-1.20 (AVX-512) and
// x0.96-1.16 (AVX2 forced), 1 close to 2; on an Intel Xeon (AMX, a KVM guest) 1 and 2 against 4 ran
// 3-13% faster on the AVX-512 kernels and 3-5% on the AVX2 ones, 8 ran 5-9% slower, none at all
// 23-33% slower; on an AMD EPYC Zen 3 guest (AVX2) 1 against 4 x1.02-1.11 with one thread, 2 no
// better than 1, 6 and 8 slower. Read once.
int decode_prefetch_tiles();

}  // namespace attnkit::cpu
