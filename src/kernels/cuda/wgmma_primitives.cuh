#pragma once
// Hopper (sm_90a) primitives of CUDA_FLASH's warp-specialised prefill kernel
// (flash_wgmma_kernel.cuh): mbarriers, tensor-map copies (TMA), the async-proxy fence,
// register reallocation and warpgroup matrix multiplies (wgmma) with fp32 accumulators.
//
// wgmma m64nNk16 (one warpgroup = 4 warps, warp w owning rows 16w..16w+15; g = lane / 4,
// t = lane % 4), the same per-warp fragments as mma.sync m16n8k16:
//   D (fp32, N/2 registers): d[4j + e] is row g + 8 * (e / 2), column 8j + 2t + e % 2.
//   A from registers (4 regs of 2 elements): (g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..).
//   A and B from shared memory: a 64-bit descriptor (make_smem_desc) of a 128-byte-swizzled
//   tile: rows of 64 elements (128 bytes), 16-byte chunk c of row r stored at chunk
//   c ^ (r % 8), 8-row groups 1024 bytes apart, tiles 1024-byte aligned.
//     K-major operand (Q as A, K as B of S = Q K^T): k16 step s of a 64-wide slab starts
//       32 s bytes into the slab; further slabs of 64 columns follow at their own offset.
//     MN-major operand (V as B of O = P V, "transposed"): N runs along the 128-byte rows
//       (leading byte offset: from one 64-column slab to the next), K down the rows
//       (stride byte offset: 1024, one 8-key group to the next).
// Accumulator and A registers are read and written asynchronously between the wgmma and
// its wait_group: fence_operands() after the wait (and around the issue) keeps the
// compiler from touching them in between.
//
// Every function here compiles only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); the kernel
// itself is built in a translation unit compiled for that target alone (CMake).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace attnkit::cuda::sm90 {

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Blocks until the phase with the given parity (0 or 1) of the barrier has completed.
// Built with ATTNKIT_WGMMA_WATCHDOG (bench/variants/watchdog.h), a wait that lasts 4e9
// clock cycles prints the block, thread, barrier address and parity and traps, so that a
// kernel that deadlocks on a barrier says where (bench/results/cuda.md, run 64).
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
#ifdef ATTNKIT_WGMMA_WATCHDOG
  const long long start = clock64();
#endif
  do {
#ifdef ATTNKIT_WGMMA_WATCHDOG
    if (clock64() - start > 4000000000LL) {
      printf("watchdog: block %d thread %d mbarrier 0x%x parity %u\n", blockIdx.x, threadIdx.x, bar,
             parity);
      __trap();
    }
#endif
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}
// One pending arrival on the barrier, made when all of this thread's earlier cp.async
// copies have landed (the barrier's count includes it: .noinc).
__device__ __forceinline__ void cp_async_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// One arrival on the barrier that also expects `bytes` more bytes of asynchronous copies
// (tma_load_4d) before its phase completes.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// A box of a 4-dimensional tensor map (cuTensorMapEncodeTiled; `map` the generic address of
// a __grid_constant__ kernel parameter) at coordinates c0..c3 (innermost first) into shared
// memory at `dst`, by the copy engine through the async proxy; its bytes count against the
// transaction count of barrier `bar`, whose phase completes when they have landed.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, int c0, int c1, int c2,
                                            int c3, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// A box of a 3-dimensional tensor map at coordinates c0..c2 (innermost first), as tma_load_4d.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, int c0, int c1, int c2,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
// Stores a box of a 3-dimensional tensor map from shared memory at `src` (a bulk group of
// this thread's: bulk_commit, then bulk_wait_read before the memory is reused or the CTA
// exits).
__device__ __forceinline__ void tma_store_3d(const void* map, uint32_t src, int c0, int c1,
                                             int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::
          "l"(reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// Stores a box of a 4-dimensional tensor map from shared memory at `src`, as tma_store_3d.
__device__ __forceinline__ void tma_store_4d(const void* map, uint32_t src, int c0, int c1, int c2,
                                             int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], "
      "[%1];\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until every committed bulk group of this thread has read its shared memory.
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// Orders this thread's generic-proxy shared-memory accesses (ordinary stores, cp.async)
// with the async proxy that wgmma reads through.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrives at barrier `id` without waiting (the other `threads` - 32 * warps arrive by
// named_barrier_sync).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// Descriptor of a 128-byte-swizzled shared-memory operand starting at `addr` (a
// shared-window address): leading and stride byte offsets as in the header comment.
__device__ __forceinline__ uint64_t make_smem_desc(uint32_t addr, uint32_t leading_bytes,
                                                   uint32_t stride_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) |
         (static_cast<uint64_t>((leading_bytes & 0x3FFFFu) >> 4) << 16) |
         (static_cast<uint64_t>((stride_bytes & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
// The same descriptor moved `bytes` (a multiple of 16) further into shared memory.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + (bytes >> 4);
}

// D (+)= A B for one k16 step: A (64 x 16) and B (16 x N, K-major) both from shared
// memory (scale_d = 0 overwrites D).
template <int N, typename T>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                         int scale_d);
// D (+)= A B for one k16 step: A from registers, B (16 x N) MN-major from shared memory.
template <int N, typename T>
__device__ __forceinline__ void wgmma_rs_tb(float (&d)[N / 2], const uint32_t (&a)[4],
                                            uint64_t desc_b, int scale_d);

// Operand lists written out (inline PTX takes no register ranges): the accumulator
// operands and their register string for N/2 = 32, 64, 128, then one definition of both
// products per N, instantiated for bf16 and fp16.
#define ATTNKIT_WGMMA_ACC32                                                                       \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define ATTNKIT_WGMMA_REGS32                                                                    \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define ATTNKIT_WGMMA_ACC64                                                                       \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define ATTNKIT_WGMMA_REGS64                                                                    \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}"
#define ATTNKIT_WGMMA_ACC128                                                                      \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),  \
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),  \
      "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),  \
      "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),  \
      "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),  \
      "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),  \
      "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),          \
      "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),         \
      "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),         \
      "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]),         \
      "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define ATTNKIT_WGMMA_REGS128                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "    \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "     \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "     \
  "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, "     \
  "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "     \
  "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, " \
  "%109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "     \
  "%124, %125, %126, %127}"
#define ATTNKIT_WGMMA_N64(T, PTX)                                                                  \
  template <>                                                                                      \
  __device__ __forceinline__ void wgmma_ss<64, T>(float(&d)[32], uint64_t desc_a, uint64_t desc_b, \
                                                  int scale_d) {                                   \
    asm volatile(                                                                                  \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                               \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX "." PTX " " ATTNKIT_WGMMA_REGS32         \
        ", %32, %33, p, 1, 1, 0, 0;\n}\n"                                                          \
        : ATTNKIT_WGMMA_ACC32                                                                      \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                 \
  }                                                                                                \
  template <>                                                                                      \
  __device__ __forceinline__ void wgmma_rs_tb<64, T>(float(&d)[32], const uint32_t(&a)[4],         \
                                                     uint64_t desc_b, int scale_d) {               \
    asm volatile(                                                                                  \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                               \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX "." PTX " " ATTNKIT_WGMMA_REGS32         \
        ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                            \
        : ATTNKIT_WGMMA_ACC32                                                                      \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));                  \
  }
#define ATTNKIT_WGMMA_N128(T, PTX)                                                          \
  template <>                                                                               \
  __device__ __forceinline__ void wgmma_ss<128, T>(float(&d)[64], uint64_t desc_a,          \
                                                   uint64_t desc_b, int scale_d) {          \
    asm volatile(                                                                           \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                        \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX "." PTX " " ATTNKIT_WGMMA_REGS64 \
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"                                                   \
        : ATTNKIT_WGMMA_ACC64                                                               \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                          \
  }                                                                                         \
  template <>                                                                               \
  __device__ __forceinline__ void wgmma_rs_tb<128, T>(float(&d)[64], const uint32_t(&a)[4], \
                                                      uint64_t desc_b, int scale_d) {       \
    asm volatile(                                                                           \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                        \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX "." PTX " " ATTNKIT_WGMMA_REGS64 \
        ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                     \
        : ATTNKIT_WGMMA_ACC64                                                               \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));           \
  }
#define ATTNKIT_WGMMA_N256(T, PTX)                                                           \
  template <>                                                                                \
  __device__ __forceinline__ void wgmma_ss<256, T>(float(&d)[128], uint64_t desc_a,          \
                                                   uint64_t desc_b, int scale_d) {           \
    asm volatile(                                                                            \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                        \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." PTX "." PTX " " ATTNKIT_WGMMA_REGS128 \
        ", %128, %129, p, 1, 1, 0, 0;\n}\n"                                                  \
        : ATTNKIT_WGMMA_ACC128                                                               \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                           \
  }                                                                                          \
  template <>                                                                                \
  __device__ __forceinline__ void wgmma_rs_tb<256, T>(float(&d)[128], const uint32_t(&a)[4], \
                                                      uint64_t desc_b, int scale_d) {        \
    asm volatile(                                                                            \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                        \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." PTX "." PTX " " ATTNKIT_WGMMA_REGS128 \
        ", {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"                                 \
        : ATTNKIT_WGMMA_ACC128                                                               \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));            \
  }
ATTNKIT_WGMMA_N64(__nv_bfloat16, "bf16")
ATTNKIT_WGMMA_N64(__half, "f16")
ATTNKIT_WGMMA_N128(__nv_bfloat16, "bf16")
ATTNKIT_WGMMA_N128(__half, "f16")
ATTNKIT_WGMMA_N256(__nv_bfloat16, "bf16")
ATTNKIT_WGMMA_N256(__half, "f16")
#undef ATTNKIT_WGMMA_N64
#undef ATTNKIT_WGMMA_N128
#undef ATTNKIT_WGMMA_N256
#undef ATTNKIT_WGMMA_ACC32
#undef ATTNKIT_WGMMA_REGS32
#undef ATTNKIT_WGMMA_ACC64
#undef ATTNKIT_WGMMA_REGS64
#undef ATTNKIT_WGMMA_ACC128
#undef ATTNKIT_WGMMA_REGS128

}  // namespace attnkit::cuda::sm90
