// The conformance suite itself: it passes every registered CPU backend, catches each
// deliberately broken backend in the cases that exercise its bug (and only there), routes
// tensors through the device-memory hook, and generates only what capabilities declare.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "attnkit/conformance/conformance.h"
#include "attnkit/core/json_schema.h"
#include "attnkit/registry/registry.h"
#include "mutant_backends.h"

namespace attnkit::conformance {
namespace {

using testing::make_declaring_backend;
using testing::make_mutant_backend;
using testing::Mutation;

std::string failures(const ConformanceReport& report) {
  std::string out;
  for (const CaseResult& r : report.results) {
    if (r.status == CaseStatus::kFailed) out += r.name + ": " + r.message + "\n";
  }
  return out;
}

ConformanceReport run_filtered(const AttentionBackend& backend, const std::string& filter,
                               DeviceMemory* memory = nullptr) {
  ConformanceOptions options;
  options.filter = filter;
  options.memory = memory;
  return run_conformance(backend, options);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs the quick-budget cases `pick` selects, on the host.
ConformanceReport run_where(const AttentionBackend& backend,
                            const std::function<bool(const std::string&)>& pick) {
  ConformanceReport report;
  report.backend = std::string(backend.name());
  auto memory = make_host_memory();
  for (const ConformanceCase& c : generate_cases(backend, Budget::kQuick)) {
    if (pick(c.name)) report.results.push_back(run_case(backend, c, cpu_platform(), *memory));
  }
  return report;
}

// Generic over the registry: every backend this binary can run on the CPU (REFERENCE,
// and CPU_FLASH once it is registered) passes the quick budget.
TEST(ConformanceSuite, EveryRegisteredCpuBackendPassesTheQuickBudget) {
  const Platform cpu = cpu_platform();
  std::set<std::string> checked;
  for (const std::string& name : global_registry().names()) {
    std::shared_ptr<const AttentionBackend> backend = global_registry().get(name);
    if (backend->capabilities().platform != PlatformKind::kCpu || backend->binary_reason(cpu)) {
      continue;
    }
    const ConformanceReport report = run_conformance(*backend);
    EXPECT_TRUE(report.ok()) << name << " failed:\n" << failures(report);
    // An MLA-only backend (one head size, decoder only) gets far fewer quick cases.
    const BackendCapabilities& caps = backend->capabilities();
    // A state backend serves one layer type: its cases are that type's sizes x dtypes x batches.
    const int fewest = caps.mla_only ? 5 : (caps.state_layer_types.empty() ? 20 : 10);
    EXPECT_GT(report.count(CaseStatus::kPassed), fewest) << name;
    checked.insert(name);
  }
  EXPECT_TRUE(checked.count("REFERENCE"));
}

TEST(ConformanceSuite, CatchesABackendThatIgnoresTheSlidingWindow) {
  auto mutant = make_mutant_backend(Mutation::kIgnoresWindow);
  const ConformanceReport report = run_where(*mutant, [](const std::string& name) {
    return has(name, "window") || name == "decode/bfloat16/kv=auto/h128/q8kv2/bs16/NHD";
  });
  int window_cases = 0;
  for (const CaseResult& r : report.results) {
    if (r.name.find("window") != std::string::npos) {
      ++window_cases;
      EXPECT_EQ(r.status, CaseStatus::kFailed) << r.name;
      EXPECT_NE(r.message.find("output error"), std::string::npos) << r.message;
    } else {
      EXPECT_EQ(r.status, CaseStatus::kPassed) << r.name << ": " << r.message;
    }
  }
  EXPECT_GE(window_cases, 5);  // mixed and decode batches, with sinks, soft-cap, fp8, MLA
  EXPECT_EQ(report.results.size(), static_cast<size_t>(window_cases) + 1);
  EXPECT_FALSE(report.ok());
}

TEST(ConformanceSuite, CatchesAnUnwrittenOutputElement) {
  auto mutant = make_mutant_backend(Mutation::kUnwrittenElement);
  const ConformanceReport report = run_filtered(*mutant, "mixed/float32/kv=auto");
  ASSERT_EQ(report.results.size(), 1u);
  const CaseResult& r = report.results[0];
  EXPECT_EQ(r.status, CaseStatus::kFailed);
  EXPECT_TRUE(std::isnan(r.output_error));
  // The last element: token 50 (37 + 12 + 1 + 1 tokens), head 7, dim 127.
  EXPECT_NE(r.message.find("output has 1 NaN/inf elements (first at token 50 head 7 dim 127)"),
            std::string::npos)
      << r.message;
}

TEST(ConformanceSuite, CatchesAnFp8CacheWriteThatTruncates) {
  auto mutant = make_mutant_backend(Mutation::kTruncatingFp8);
  const ConformanceReport report = run_where(*mutant, [](const std::string& name) {
    return (has(name, "kv=fp8") && (!has(name, "mla") || has(name, "decode/"))) ||
           name == "mixed/bfloat16/kv=bfloat16/h128/q8kv2/bs16/NHD";
  });
  int fp8_cases = 0;
  for (const CaseResult& r : report.results) {
    if (r.name.find("kv=fp8") != std::string::npos) {
      ++fp8_cases;
      EXPECT_EQ(r.status, CaseStatus::kFailed) << r.name;
      EXPECT_GT(r.cache_error, r.tolerance.cache) << r.name;
      EXPECT_TRUE(has(r.message, "cache rows written differ")) << r.message;
    } else {
      EXPECT_EQ(r.status, CaseStatus::kPassed) << r.name << ": " << r.message;
    }
  }
  EXPECT_GE(fp8_cases, 5);  // e4m3 and e5m2, with a window and sinks, MLA decodes
  EXPECT_EQ(report.results.size(), static_cast<size_t>(fp8_cases) + 1);
}

TEST(ConformanceSuite, CatchesAWriteOutsideTheStepsSlots) {
  auto mutant = make_mutant_backend(Mutation::kWritesSpareBlock);
  const ConformanceReport report = run_filtered(*mutant, "mixed/float32/kv=auto");
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, CaseStatus::kFailed);
  EXPECT_NE(report.results[0].message.find("key cache changed outside this step's slots"),
            std::string::npos)
      << report.results[0].message;
}

// Host memory that labels itself as CUDA device 3 and records what it handed out; the
// backend below checks that every tensor it is given lives there.
class LabelledMemory final : public DeviceMemory {
 public:
  Device device() const override { return Device{DeviceType::kCuda, 3}; }
  void* allocate(size_t bytes) override {
    void* p = host_->allocate(bytes);
    live_.insert(p);
    ++allocations;
    return p;
  }
  void deallocate(void* ptr) noexcept override {
    live_.erase(ptr);
    host_->deallocate(ptr);
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    bytes_in += bytes;
    host_->copy_to_device(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    bytes_out += bytes;
    host_->copy_to_host(dst, src, bytes);
  }
  void synchronize() override { ++syncs; }
  bool owns(const void* p) const { return live_.count(const_cast<void*>(p)) > 0; }
  size_t live() const { return live_.size(); }

  size_t allocations = 0, bytes_in = 0, bytes_out = 0, syncs = 0;

 private:
  std::unique_ptr<DeviceMemory> host_ = make_host_memory();
  std::set<void*> live_;
};

class DeviceCheckingImpl final : public AttentionImpl {
 public:
  DeviceCheckingImpl(std::unique_ptr<AttentionImpl> inner, const LabelledMemory& memory)
      : inner_(std::move(inner)), memory_(memory) {}
  std::string_view backend_name() const override { return "DEVICE_CHECKING"; }
  void forward(const TensorView& q, const TensorView& k, const TensorView& v,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& out, const ExecutionContext& /*ctx*/) override {
    for (const TensorView* t : {&q, &k, &v, &cache.key, &cache.value, &out}) {
      if (t->empty()) continue;  // MLA has no value tensors
      EXPECT_EQ(t->device, memory_.device());
      EXPECT_TRUE(memory_.owns(t->data));
    }
    auto host = [](TensorView t) {
      t.device = Device{};
      return t;
    };
    KvCacheTensors host_cache = cache;
    host_cache.key = host(cache.key);
    host_cache.value = host(cache.value);
    inner_->forward(host(q), host(k), host(v), host_cache, metadata, host(out));
  }

 private:
  std::unique_ptr<AttentionImpl> inner_;
  const LabelledMemory& memory_;
};

class DeviceCheckingBackend final : public AttentionBackend {
 public:
  explicit DeviceCheckingBackend(const LabelledMemory& memory) : memory_(memory) {}
  std::string_view name() const override { return "DEVICE_CHECKING"; }
  std::string_view description() const override { return "checks where its tensors live"; }
  const BackendCapabilities& capabilities() const override { return reference_->capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    return reference_->make_builder(spec, layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return std::make_unique<DeviceCheckingImpl>(reference_->make_impl(layer), memory_);
  }

 private:
  const LabelledMemory& memory_;
  std::shared_ptr<const AttentionBackend> reference_ = global_registry().get("REFERENCE");
};

TEST(ConformanceSuite, PassesTensorsThroughTheDeviceMemoryHook) {
  LabelledMemory memory;
  DeviceCheckingBackend backend(memory);
  const ConformanceReport report =
      run_filtered(backend, "decode/bfloat16/kv=fp8_e4m3/h576v512", &memory);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, CaseStatus::kPassed) << report.results[0].message;
  EXPECT_EQ(memory.allocations, 4u);  // query, latent key, latent cache, output (MLA: no V)
  EXPECT_GT(memory.bytes_in, 0u);
  EXPECT_GT(memory.bytes_out, 0u);
  EXPECT_EQ(memory.syncs, 1u);
  EXPECT_EQ(memory.live(), 0u);  // everything freed
}

TEST(ConformanceSuite, GeneratesOnlyWhatTheCapabilitiesDeclare) {
  BackendCapabilities caps;
  caps.dtypes = {DType::kFloat16};
  caps.kv_cache_dtypes = {KvCacheDType::kFp8E4M3};
  caps.head_sizes = SizeRule::list({64, 128});
  caps.kernel_block_sizes = SizeRule::multiple(16);
  caps.preferred_block_size = 32;
  caps.required_layout = KvLayout::kHND;
  caps.sliding_window = true;
  auto backend = make_declaring_backend(caps);
  const std::vector<ConformanceCase> cases = generate_cases(*backend, Budget::kFull);
  ASSERT_FALSE(cases.empty());
  std::set<int> heads, blocks;
  bool window = false, fp8 = false;
  for (const ConformanceCase& c : cases) {
    EXPECT_EQ(c.layer.dtype, DType::kFloat16) << c.name;
    EXPECT_EQ(c.layout, KvLayout::kHND) << c.name;
    EXPECT_EQ(c.layer.attn_type, AttentionType::kDecoder) << c.name;
    EXPECT_FALSE(c.layer.use_mla || c.layer.chunk_size || c.layer.soft_cap > 0 ||
                 !c.layer.sinks.empty())
        << c.name;
    EXPECT_EQ(c.layer.head_size_v, c.layer.head_size) << c.name;
    heads.insert(c.layer.head_size);
    blocks.insert(c.block_size);
    window |= c.layer.sliding_window > 0;
    fp8 |= c.layer.kv_cache_dtype == KvCacheDType::kFp8E4M3;
  }
  EXPECT_EQ(heads, (std::set<int>{64, 128}));
  EXPECT_EQ(*blocks.begin(), 16);
  for (int b : blocks) EXPECT_EQ(b % 16, 0);
  EXPECT_TRUE(window);
  EXPECT_TRUE(fp8);
  // Contexts from 1 token to several thousand, and a mix of prefills and decodes.
  int shortest = 1 << 30, longest = 0;
  for (const ConformanceCase& c : cases) {
    for (int s : c.seq_lens) {
      shortest = std::min(shortest, s);
      longest = std::max(longest, s);
    }
  }
  EXPECT_EQ(shortest, 1);
  EXPECT_GE(longest, 4000);
}

TEST(ConformanceSuite, MlaOnlyBackendsGetOnlyMlaCases) {
  BackendCapabilities caps;
  caps.dtypes = {DType::kBFloat16};
  caps.head_sizes = SizeRule::list({576});
  caps.separate_v_head_size = true;
  caps.mla = true;
  caps.mla_only = true;
  caps.kernel_block_sizes = SizeRule::list({64});
  caps.preferred_block_size = 64;
  auto backend = make_declaring_backend(caps);
  const std::vector<ConformanceCase> cases = generate_cases(*backend, Budget::kQuick);
  ASSERT_FALSE(cases.empty());
  for (const ConformanceCase& c : cases) {
    EXPECT_TRUE(c.layer.use_mla) << c.name;
    EXPECT_EQ(c.layer.head_size, 576);
    EXPECT_EQ(c.layer.head_size_v, 512);
    EXPECT_EQ(c.block_size, 64);
  }
}

TEST(ConformanceSuite, CasesTheCombinationHookRejectsAreSkippedWithItsReason) {
  BackendCapabilities caps = global_registry().get("REFERENCE")->capabilities();
  auto backend = make_declaring_backend(caps, /*reject_fp8_in_hook=*/true);
  const ConformanceReport report = run_filtered(*backend, "mixed/bfloat16/kv=fp8_e5m2/h128");
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, CaseStatus::kSkipped);
  EXPECT_NE(report.results[0].message.find("fp8 KV cache not in this build"), std::string::npos);
  EXPECT_FALSE(report.ok());  // nothing ran
}

TEST(ConformanceSuite, ReportsAsTableAndJson) {
  auto mutant = make_mutant_backend(Mutation::kUnwrittenElement);
  const ConformanceReport report = run_filtered(*mutant, "mixed/float32/kv=auto");
  const std::string table = format_table(report);
  EXPECT_NE(table.find("FAIL   mixed/float32/kv=auto/h128/q8kv2/bs16/NHD"), std::string::npos)
      << table;
  EXPECT_NE(table.find("MUTANT: 0 passed, 1 failed, 0 skipped of 1 cases"), std::string::npos)
      << table;
  const nlohmann::json j = to_json(report);
  EXPECT_EQ(j["schema_version"], kJsonSchemaVersion);
  EXPECT_EQ(j["backend"], "MUTANT");
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["ok"], false);
  EXPECT_TRUE(j["cases"][0]["output_error"].is_null());  // NaN
  EXPECT_EQ(j["cases"][0]["status"], "FAIL");
}

TEST(ConformanceSuite, ToleranceTableIsOrderedByPrecision) {
  EXPECT_LT(tolerance_for(DType::kFloat32, KvCacheDType::kAuto).output,
            tolerance_for(DType::kFloat16, KvCacheDType::kAuto).output);
  EXPECT_LT(tolerance_for(DType::kFloat16, KvCacheDType::kAuto).output,
            tolerance_for(DType::kBFloat16, KvCacheDType::kAuto).output);
  EXPECT_LT(tolerance_for(DType::kBFloat16, KvCacheDType::kFp8E4M3).cache,
            tolerance_for(DType::kBFloat16, KvCacheDType::kFp8E5M2).cache);
}

}  // namespace
}  // namespace attnkit::conformance
