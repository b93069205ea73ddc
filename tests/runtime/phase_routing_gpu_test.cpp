// Per-phase composites on a CUDA device (skipped without one): CUDA_FLASH for prefill rows
// and CUDA_PAGED for decode rows over one KV cache give what CUDA_PAGED alone gives, over
// prefill, mixed (decodes first) and decode steps, and each phase's backend ran.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attnkit/core/numeric.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/runtime/attention_stack.h"
#include "runtime/device_io.h"

namespace attnkit {
namespace {

HostTensor random_rows(int64_t tokens, int heads, int width, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  HostTensor t(ScalarType::kFloat16, {tokens, heads, width});
  for (int64_t i = 0; i < t.view().numel(); ++i) {
    store_from_float(t.data(), ScalarType::kFloat16, i, normal(rng));
  }
  return t;
}

AttentionStackOptions gpu_options(const Platform& gpu, const char* config) {
  AttentionStackOptions o;
  o.platform = gpu;
  o.dtype = DType::kFloat16;
  o.kv_cache_bytes = size_t{256} << 20;
  o.attention = parse_attention_config(config);
  return o;
}

TEST(PhaseRoutingGpu, CudaFlashPrefillWithCudaPagedDecodeMatchesCudaPaged) {
  const std::optional<Platform> gpu = local_cuda_platform();
  if (!gpu) GTEST_SKIP() << "no CUDA GPU on this machine (or a build without CUDA)";
  const ModelDescription model = load_model("llama-3.1-8b-instruct");
  AttentionStack ours(model, gpu_options(*gpu, R"({"prefill_backend": "CUDA_FLASH",
                                                   "decode_backend": "CUDA_PAGED"})"));
  AttentionStack paged(model, gpu_options(*gpu, R"({"backend": "CUDA_PAGED"})"));
  ASSERT_TRUE(ours.layer(0).selection->phases);
  EXPECT_EQ(ours.layer(0).selection->backend, "prefill:CUDA_FLASH|decode:CUDA_PAGED");

  const std::vector<std::vector<StepRequest>> steps = {
      {{1, 0, 300}, {2, 0, 45}},
      {{1, 300, 1}, {2, 45, 1}, {3, 0, 200}},
      {{1, 301, 1}, {2, 46, 1}, {3, 200, 1}},
  };
  DeviceIo io(PlatformKind::kCuda);
  std::mt19937 rng(11);
  for (const std::vector<StepRequest>& step : steps) {
    for (const StepRequest& r : step) {
      if (!ours.has_request(r.id)) {
        ours.add_request(r.id);
        paged.add_request(r.id);
      }
    }
    ours.plan_step(step);
    paged.plan_step(step);
    int64_t tokens = 0;
    for (const StepRequest& r : step) tokens += r.num_new_tokens;
    const AttentionLayerParams& p = ours.layer(0).params;
    const HostTensor q = random_rows(tokens, p.num_heads, p.head_size, rng);
    const HostTensor k = random_rows(tokens, p.num_kv_heads, p.head_size, rng);
    const HostTensor v = random_rows(tokens, p.num_kv_heads, p.head_size_v, rng);
    const HostTensor a(ScalarType::kFloat16, {tokens, p.num_heads, p.head_size_v});
    const HostTensor b(ScalarType::kFloat16, {tokens, p.num_heads, p.head_size_v});
    const TensorView qd = io.stage(q, 0), kd = io.stage(k, 1), vd = io.stage(v, 2);
    const TensorView ad = io.scratch(a, 3);
    ours.forward(0, qd, kd, vd, ad);
    io.fetch(ad, a);
    const TensorView bd = io.scratch(b, 3);
    paged.forward(0, qd, kd, vd, bd);
    io.fetch(bd, b);
    float worst = 0.0f;
    for (int64_t i = 0; i < a.view().numel(); ++i) {
      const float d = std::fabs(load_as_float(a.data(), ScalarType::kFloat16, i) -
                                load_as_float(b.data(), ScalarType::kFloat16, i));
      worst = std::isnan(d) ? INFINITY : std::max(worst, d);
    }
    EXPECT_LE(worst, 1e-2f) << "step of " << tokens << " tokens";
  }
}

}  // namespace
}  // namespace attnkit
