// GPU conformance of CUDA_MLA against REFERENCE's MLA path, through the conformance suite
// (fresh random inputs from each case's seed, a paged latent cache in random physical
// block order with garbage in unused slots, the output poisoned with NaN, the cache rows
// written this step compared too). Two sets:
//   - the cases the suite generates from CUDA_MLA's declared capabilities (full budget);
//   - shapes the generator does not reach: DeepSeek's 128 and 16 heads, page 64, long
//     contexts (split-KV), prefill and mixed batches over many heads, every declared KV
//     dtype with both compute dtypes, sliding windows in prefill, odd and large pages, HND.
// Skipped with a message when no GPU is present. Tolerances are the suite's
// (conformance::tolerance_for: bf16 2.5e-2, fp16 4e-3, fp8 3e-2 relative L2).

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "attnkit/conformance/conformance.h"
#include "attnkit/core/platform.h"
#include "backends/cuda_mla/cuda_mla_backend.h"
#include "backends/cuda_mla/mla_config_choice.h"

namespace attnkit::conformance {
namespace {

ConformanceCase mla_case(std::string name, int heads, std::vector<int> query_lens,
                         std::vector<int> seq_lens) {
  ConformanceCase c;
  c.name = std::move(name);
  c.layer.num_heads = heads;
  c.layer.num_kv_heads = 1;
  c.layer.head_size = 576;
  c.layer.head_size_v = 512;
  c.layer.use_mla = true;
  c.layer.mla_rope_dim = 64;
  c.layer.scale = 1.0f / std::sqrt(192.0f);  // DeepSeek: 1/sqrt(qk_nope + qk_rope)
  c.layer.dtype = DType::kBFloat16;
  c.block_size = 64;
  c.query_lens = std::move(query_lens);
  c.seq_lens = std::move(seq_lens);
  c.seed = std::hash<std::string>{}(c.name) ^ 0x5eedu;
  return c;
}

ConformanceCase with_kv(ConformanceCase c, DType dtype, KvCacheDType kv) {
  c.layer.dtype = dtype;
  c.layer.kv_cache_dtype = kv;
  if (kv == KvCacheDType::kFp8E4M3) {
    c.layer.k_scale = c.layer.v_scale = 0.0173f;  // one latent row, one scale
  }
  return c;
}

// Readable test listings (ctest -N) instead of a byte dump.
struct NamedCase {
  ConformanceCase c;
};
void PrintTo(const NamedCase& n, std::ostream* os) { *os << n.c.name; }

std::vector<NamedCase> explicit_cases() {
  std::vector<ConformanceCase> out;
  const std::vector<int> decode_q = {1, 1, 1, 1};
  const std::vector<int> decode_kv = {8192, 3000, 1, 65};
  for (DType d : {DType::kBFloat16, DType::kFloat16}) {
    const std::string ds = d == DType::kBFloat16 ? "Bf16" : "Fp16";
    for (KvCacheDType kv : {KvCacheDType::kAuto, KvCacheDType::kFp8E4M3}) {
      const std::string ks = kv == KvCacheDType::kAuto ? "" : "Fp8";
      for (int heads : {128, 16}) {
        const std::string hs = fmt::format("H{}", heads);
        out.push_back(
            with_kv(mla_case("Decode" + hs + ds + ks, heads, decode_q, decode_kv), d, kv));
      }
      out.push_back(
          with_kv(mla_case("MixedH128" + ds + ks, 128, {1, 37, 3, 1}, {2000, 300, 700, 1}), d, kv));
    }
    // Exactly representable in the compute dtype, so the cache dtype can be named.
    out.push_back(
        with_kv(mla_case("ExplicitCacheDtypeH16" + ds, 16, {1, 5}, {900, 40}), d,
                d == DType::kBFloat16 ? KvCacheDType::kBFloat16 : KvCacheDType::kFloat16));
  }
  out.push_back(mla_case("PrefillH128", 128, {200, 64}, {200, 64}));
  out.push_back(mla_case("PrefillChunkH16", 16, {150, 1}, {1200, 4000}));
  out.push_back(mla_case("OddHeadsH20", 20, {1, 3, 1}, {1500, 3, 333}));
  out.push_back(mla_case("OneHeadH1", 1, {1, 9}, {700, 9}));
  out.push_back(
      mla_case("ManyShortDecodesH128", 128, std::vector<int>(40, 1), std::vector<int>(40, 100)));
  ConformanceCase window = mla_case("SlidingWindowDecodeH16", 16, decode_q, decode_kv);
  window.layer.sliding_window = 1000;
  out.push_back(window);
  ConformanceCase window_prefill = mla_case("SlidingWindowPrefillH128", 128, {180, 1}, {500, 900});
  window_prefill.layer.sliding_window = 64;
  out.push_back(window_prefill);
  ConformanceCase window_fp8 = with_kv(window, DType::kBFloat16, KvCacheDType::kFp8E4M3);
  window_fp8.name = "SlidingWindowDecodeH16Fp8";
  out.push_back(window_fp8);
  for (int bs : {1, 5, 16, 128}) {
    out.push_back(mla_case(fmt::format("Block{}H16", bs), 16, {1, 20, 1}, {1000, 60, 7}));
  }
  ConformanceCase hnd = mla_case("HndLayoutH16", 16, {1, 20, 1}, {1000, 60, 7});
  hnd.layout = KvLayout::kHND;
  out.push_back(hnd);
  ConformanceCase scale = mla_case("OtherScaleH16", 16, {1, 4}, {2500, 50});
  scale.layer.scale = 0.31f;
  out.push_back(scale);
  std::vector<NamedCase> named;
  for (ConformanceCase& c : out) named.push_back({std::move(c)});
  return named;
}

class CudaMlaGpuConformance : public ::testing::TestWithParam<NamedCase> {};

TEST_P(CudaMlaGpuConformance, MatchesReference) {
  const std::optional<Platform> gpu = local_cuda_platform();
  if (!gpu) GTEST_SKIP() << "no CUDA GPU on this machine (or a build without CUDA)";
  const auto backend = make_cuda_mla_backend();
  const std::unique_ptr<DeviceMemory> memory = make_cuda_memory(0);
  const ConformanceCase& c = GetParam().c;
  const CaseResult r = run_case(*backend, c, *gpu, *memory);
  EXPECT_EQ(r.status, CaseStatus::kPassed) << c.name << ": " << r.message;
  std::printf("[ output %.2e (tol %.1e) cache %.2e %.2fs ] %s\n", r.output_error,
              r.tolerance.output, r.cache_error, r.seconds, c.name.c_str());
}

INSTANTIATE_TEST_SUITE_P(Mla, CudaMlaGpuConformance, ::testing::ValuesIn(explicit_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& param_info) {
                           return param_info.param.c.name;
                         });

// On an sm_90 GPU the large-row work runs MlaLargeSm90Config; these cases force the
// configuration sm_80 runs (MlaLargeConfig), so that it stays proven on the same GPU.
TEST(CudaMlaGpuSm80Config, LargeRowCasesMatchReference) {
  const std::optional<Platform> gpu = local_cuda_platform();
  if (!gpu) GTEST_SKIP() << "no CUDA GPU on this machine (or a build without CUDA)";
  const auto backend = make_cuda_mla_backend();
  const std::unique_ptr<DeviceMemory> memory = make_cuda_memory(0);
  std::vector<ConformanceCase> cases;
  cases.push_back(mla_case("Sm80DecodeH128Bf16", 128, {1, 1, 1}, {8192, 700, 1}));
  cases.push_back(with_kv(mla_case("Sm80DecodeH128Fp16Fp8", 128, {1, 1}, {3000, 65}),
                          DType::kFloat16, KvCacheDType::kFp8E4M3));
  cases.push_back(mla_case("Sm80PrefillH128", 128, {120, 1}, {120, 900}));
  ConformanceCase window = mla_case("Sm80SlidingWindowPrefillH128", 128, {90, 1}, {400, 700});
  window.layer.sliding_window = 64;
  cases.push_back(window);
  cuda_mla::set_large_row_config(cuda_mla::LargeRowConfig::kSm80);
  for (const ConformanceCase& c : cases) {
    const CaseResult r = run_case(*backend, c, *gpu, *memory);
    EXPECT_EQ(r.status, CaseStatus::kPassed) << c.name << ": " << r.message;
    std::printf("[ output %.2e (tol %.1e) cache %.2e %.2fs ] %s\n", r.output_error,
                r.tolerance.output, r.cache_error, r.seconds, c.name.c_str());
  }
  cuda_mla::set_large_row_config(cuda_mla::LargeRowConfig::kAuto);
}

// The suite's own cases from the declared capabilities: every one either passes or is
// skipped by the combination hook (a 16-bit cache that differs from the compute dtype).
TEST(CudaMlaGpuSuite, GeneratedCasesPass) {
  if (!local_cuda_platform()) GTEST_SKIP() << "no CUDA GPU on this machine";
  const auto backend = make_cuda_mla_backend();
  ConformanceOptions options;
  options.budget = Budget::kFull;
  const ConformanceReport report = run_conformance(*backend, options);
  std::printf("%s", format_table(report).c_str());
  EXPECT_TRUE(report.ok()) << format_table(report);
  EXPECT_GE(report.count(CaseStatus::kPassed), 10);
  for (const CaseResult& r : report.results) {
    if (r.status == CaseStatus::kSkipped) {
      EXPECT_NE(r.message.find("kv_cache_dtype"), std::string::npos) << r.name << ": " << r.message;
    }
  }
}

}  // namespace
}  // namespace attnkit::conformance
