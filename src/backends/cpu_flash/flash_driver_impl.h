#pragma once
// Runs a plan with the per-ISA kernels: one OpenMP team, items handed out dynamically
// (they are sorted longest first), then the split-KV merges. Compiled per ISA like
// flash_kernel_impl.h.

// Kernel: an item kernel class constructed per thread as Kernel(p, plan, scratch, partials)
// with run(item) (flash_kernel_impl.h's ItemKernel, flash_amx_impl.h's AmxItemKernel).
template <class Kernel>
void run_plan_with(const attnkit::PagedAttentionParams& p, const attnkit::cpu::FlashPlan& plan,
                   attnkit::cpu::FlashWorkspace& ws) {
  const int n_items = static_cast<int>(plan.items.size());
  const int n_merges = static_cast<int>(plan.merges.size());
  const int threads = std::max(1, std::min(plan.num_threads, n_items));
  float* partials = ws.partials();
  bool no_memory = false;
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(|| : no_memory)
  {
    // The thread's own scratch, kept across calls (kernels/cpu/thread_scratch.h).
    float* scratch = attnkit::cpu::thread_scratch(plan.scratch_floats_per_thread);
    no_memory = scratch == nullptr;
    std::optional<Kernel> kernel;
    if (scratch != nullptr) kernel.emplace(p, plan, scratch, partials);
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < n_items; ++i) {
      if (kernel) kernel->run(plan.items[static_cast<size_t>(i)]);
    }
    // The implicit barrier above makes every partial visible to the merges.
#pragma omp for schedule(dynamic, 1)
    for (int g = 0; g < n_merges; ++g) {
      if (scratch != nullptr) {
        merge_splits(p, plan.merges[static_cast<size_t>(g)], partials, scratch);
      }
    }
  }
  if (no_memory) {
    throw attnkit::Error(attnkit::ErrorCode::kOutOfMemory,
                         fmt::format("cannot allocate {} bytes of CPU_FLASH scratch per thread",
                                     plan.scratch_floats_per_thread * 4));
  }
}

template <class Kv, bool kDot>
void run_plan_typed(const attnkit::PagedAttentionParams& p, const attnkit::cpu::FlashPlan& plan,
                    attnkit::cpu::FlashWorkspace& ws) {
  run_plan_with<ItemKernel<Kv, kDot>>(p, plan, ws);
}

inline void run_plan(const attnkit::PagedAttentionParams& p, const attnkit::cpu::FlashPlan& plan,
                     attnkit::cpu::FlashWorkspace& ws, bool bf16_dot) {
  using attnkit::ScalarType;
  using namespace attnkit::cpu;
  switch (p.kv_dtype) {
    case ScalarType::kFloat32:
      return run_plan_typed<KvF32, false>(p, plan, ws);
    case ScalarType::kFloat16:
      return run_plan_typed<KvF16, false>(p, plan, ws);
    case ScalarType::kBFloat16:
      // bf16 x bf16 products are exact in fp32, so the dot instruction loses nothing.
      if constexpr (Ops::kHasBf16Dot) {
        if (bf16_dot && p.q_dtype == ScalarType::kBFloat16) {
          return run_plan_typed<KvBf16, true>(p, plan, ws);
        }
      }
      return run_plan_typed<KvBf16, false>(p, plan, ws);
    case ScalarType::kFp8E4M3:
      return run_plan_typed<KvE4m3, false>(p, plan, ws);
    default:
      return run_plan_typed<KvE5m2, false>(p, plan, ws);
  }
}
