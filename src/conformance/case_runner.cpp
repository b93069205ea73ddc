// Runs one conformance case: the backend on its device, REFERENCE on the host, then the
// output and cache comparisons (see conformance.h).

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "attnkit/conformance/conformance.h"
#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "backends/reference/reference_backend.h"
#include "case_inputs.h"
#include "conformance/state_cases.h"

namespace attnkit::conformance {
namespace {

// What a forward() left behind, copied to the host.
struct Outcome {
  HostTensor output, key_cache, value_cache;
};

HostTensor nan_output(const CaseInputs& in, const AttentionLayerParams& L) {
  const auto T = in.common.num_actual_tokens;
  HostTensor out(scalar_type_of(L.dtype), {T, L.num_heads, L.head_size_v});
  for (int64_t i = 0; i < out.view().numel(); ++i) {
    store_from_float(out.data(), out.view().dtype, i, std::nanf(""));
  }
  return out;
}

// A copy of `t`; an empty tensor stays empty (HostTensor::clone would give it a shape).
HostTensor clone_or_empty(const HostTensor& t) {
  return t.data() == nullptr ? HostTensor() : t.clone();
}

// One host tensor mirrored in `memory` (nothing allocated for an empty tensor).
class Mirror {
 public:
  Mirror(DeviceMemory& memory, const HostTensor& host) : host_(host) {
    if (host.data() == nullptr) return;
    buffer_.emplace(memory, host.nbytes());
    memory.copy_to_device(buffer_->data(), host.data(), host.nbytes());
    view_ = view_at(host, buffer_->data(), memory.device());
  }
  const TensorView& view() const { return view_; }
  void copy_back(DeviceMemory& memory, const HostTensor& dst) const {
    if (buffer_) memory.copy_to_host(dst.data(), buffer_->data(), host_.nbytes());
  }

 private:
  const HostTensor& host_;
  std::optional<DeviceBuffer> buffer_;
  TensorView view_;
};

Outcome run_backend(const AttentionBackend& backend, const ConformanceCase& c, const CaseInputs& in,
                    DeviceMemory& memory) {
  Outcome o{nan_output(in, c.layer), clone_or_empty(in.key_cache), clone_or_empty(in.value_cache)};
  Mirror q(memory, in.query), k(memory, in.key), v(memory, in.value);
  Mirror kc(memory, in.key_cache), vc(memory, in.value_cache), out(memory, o.output);
  KvCacheTensors cache;
  cache.key = kc.view();
  cache.value = vc.view();
  cache.layout = c.layout;
  cache.block_size = c.block_size;
  auto builder = backend.make_builder(in.spec, c.layer);
  auto impl = backend.make_impl(c.layer);
  const AttentionMetadata& plan = builder->build(in.common);
  impl->forward(q.view(), k.view(), v.view(), cache, plan, out.view());
  memory.synchronize();
  out.copy_back(memory, o.output);
  kc.copy_back(memory, o.key_cache);
  vc.copy_back(memory, o.value_cache);
  return o;
}

// Relative L2 error of `got` against `want` (both as doubles); NaN when `got` holds one.
struct Diff {
  double sum_sq_err = 0, sum_sq_ref = 0;
  int64_t nans = 0, first_nan = -1;
  void add(double got, double want, int64_t index) {
    if (std::isnan(got) || std::isinf(got)) {
      if (nans++ == 0) first_nan = index;
      return;
    }
    sum_sq_err += (got - want) * (got - want);
    sum_sq_ref += want * want;
  }
  double relative() const {
    if (nans) return NAN;
    return sum_sq_ref > 0 ? std::sqrt(sum_sq_err / sum_sq_ref) : std::sqrt(sum_sq_err);
  }
};

// Element offset of (slot, head, 0) in a cache tensor of `layout`.
int64_t row_offset(const HostTensor& t, KvLayout layout, int block_size, int64_t slot, int h) {
  const TensorView v = t.view();
  const int64_t block = slot / block_size, offset = slot % block_size;
  return layout == KvLayout::kNHD ? block * v.stride(0) + offset * v.stride(1) + h * v.stride(2)
                                  : block * v.stride(0) + h * v.stride(1) + offset * v.stride(2);
}

// Compares the cache rows this step wrote (dequantised) and requires every other byte to
// be unchanged. Returns the rows' relative L2 error; appends what is wrong to `problems`.
double compare_cache(const ConformanceCase& c, const CaseInputs& in, const HostTensor& got,
                     const HostTensor& want, int dim, float scale,
                     std::vector<std::string>& problems, const char* what) {
  if (got.data() == nullptr) return 0;
  HostTensor patched = got.clone();  // `got` with the written rows replaced by `want`'s
  const size_t elem = size_of(got.view().dtype);
  Diff diff;
  for (int64_t slot : in.common.slot_mapping) {
    if (slot < 0) continue;
    for (int h = 0; h < c.layer.num_kv_heads; ++h) {
      const int64_t base = row_offset(got, c.layout, c.block_size, slot, h);
      for (int d = 0; d < dim; ++d) {
        diff.add(
            static_cast<double>(load_as_float(got.data(), got.view().dtype, base + d)) * scale,
            static_cast<double>(load_as_float(want.data(), want.view().dtype, base + d)) * scale,
            base + d);
      }
      std::memcpy(static_cast<char*>(patched.data()) + base * static_cast<int64_t>(elem),
                  static_cast<const char*>(want.data()) + base * static_cast<int64_t>(elem),
                  static_cast<size_t>(dim) * elem);
    }
  }
  if (std::memcmp(patched.data(), want.data(), want.nbytes()) != 0) {
    problems.push_back(fmt::format("{} changed outside this step's slots", what));
  }
  if (diff.nans) {
    problems.push_back(fmt::format("{} rows written hold {} NaN/inf values", what, diff.nans));
  }
  return diff.relative();
}

std::string describe_nan(const ConformanceCase& c, int64_t index) {
  const int64_t per_token = static_cast<int64_t>(c.layer.num_heads) * c.layer.head_size_v;
  return fmt::format("token {} head {} dim {}", index / per_token,
                     index % per_token / c.layer.head_size_v, index % c.layer.head_size_v);
}

}  // namespace

std::string_view to_string(CaseStatus status) {
  switch (status) {
    case CaseStatus::kPassed:
      return "PASS";
    case CaseStatus::kFailed:
      return "FAIL";
    case CaseStatus::kSkipped:
      return "SKIP";
  }
  return "?";
}

Tolerance tolerance_for(DType dtype, KvCacheDType kv) {
  // Output: the backend may accumulate in fp32 and keep probabilities in the compute
  // dtype; these bounds sit well above that and far below any semantic error.
  Tolerance t;
  switch (dtype) {
    case DType::kFloat32:
      t.output = 1e-4;
      break;
    case DType::kFloat16:
      t.output = 4e-3;
      break;
    case DType::kBFloat16:
      t.output = 2.5e-2;
      break;
  }
  // Cache rows: the backend must round exactly as the contract says (to nearest even);
  // a truncating conversion differs by one ulp on about half of the values, a relative
  // error of about a third of an ulp, several times these bounds.
  switch (scalar_type_of(kv, dtype)) {
    case ScalarType::kFp8E4M3:
      t.cache = 1e-2;
      t.output = std::max(t.output, 3e-2);
      break;
    case ScalarType::kFp8E5M2:
      t.cache = 2e-2;
      t.output = std::max(t.output, 3e-2);
      break;
    case ScalarType::kBFloat16:
      t.cache = 5e-4;
      break;
    case ScalarType::kFloat16:
      t.cache = 6e-5;
      break;
    default:
      t.cache = 1e-6;
      break;
  }
  if (dtype == DType::kFloat32 && is_fp8(kv)) t.output = 1e-3;
  return t;
}

CaseResult run_case(const AttentionBackend& backend, const ConformanceCase& c,
                    const Platform& platform, DeviceMemory& memory) {
  if (c.layer.state) return run_state_case(backend, c, platform, memory);
  const auto start = std::chrono::steady_clock::now();
  CaseResult r;
  r.name = c.name;
  r.tolerance = tolerance_for(c.layer.dtype, c.layer.kv_cache_dtype);
  auto finish = [&](CaseStatus status, std::string message) {
    r.status = status;
    r.message = std::move(message);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };

  std::vector<std::string> reasons = backend.validate(c.selector_config(), platform);
  if (auto why = backend.binary_reason(platform)) reasons.push_back(*why);
  if (!reasons.empty())
    return finish(CaseStatus::kSkipped, fmt::format("{}", fmt::join(reasons, "; ")));

  const CaseInputs in = build_case_inputs(c);
  Outcome got;
  try {
    got = run_backend(backend, c, in, memory);
  } catch (const std::exception& e) {
    return finish(CaseStatus::kFailed, fmt::format("backend threw: {}", e.what()));
  }
  Outcome want;
  try {
    auto reference = make_reference_backend();
    auto host = make_host_memory();
    want = run_backend(*reference, c, in, *host);
  } catch (const std::exception& e) {
    return finish(CaseStatus::kFailed, fmt::format("REFERENCE rejected the case: {}", e.what()));
  }

  Diff out;
  const int64_t n = want.output.view().numel();
  for (int64_t i = 0; i < n; ++i) {
    out.add(load_as_float(got.output.data(), got.output.view().dtype, i),
            load_as_float(want.output.data(), want.output.view().dtype, i), i);
  }
  r.output_error = out.relative();
  // Every problem found is reported, separated by "; ".
  std::vector<std::string> problems;
  if (out.nans) {
    problems.push_back(
        fmt::format("output has {} NaN/inf elements (first at {}): unwritten or invalid", out.nans,
                    describe_nan(c, out.first_nan)));
  } else if (!(r.output_error <= r.tolerance.output)) {
    problems.push_back(
        fmt::format("output error {:.3g} exceeds {:.3g}", r.output_error, r.tolerance.output));
  }
  if (in.has_cache) {
    const bool fp8 = is_fp8(c.layer.kv_cache_dtype);
    const double k_err = compare_cache(c, in, got.key_cache, want.key_cache, c.layer.head_size,
                                       fp8 ? c.layer.k_scale : 1.0f, problems, "key cache");
    const double v_err =
        compare_cache(c, in, got.value_cache, want.value_cache, c.layer.head_size_v,
                      fp8 ? c.layer.v_scale : 1.0f, problems, "value cache");
    r.cache_error = std::isnan(k_err) || std::isnan(v_err) ? NAN : std::max(k_err, v_err);
    if (!std::isnan(r.cache_error) && r.cache_error > r.tolerance.cache) {
      problems.push_back(fmt::format("cache rows written differ: error {:.3g} exceeds {:.3g}",
                                     r.cache_error, r.tolerance.cache));
    }
  }
  const std::string problem = fmt::format("{}", fmt::join(problems, "; "));
  return finish(problem.empty() ? CaseStatus::kPassed : CaseStatus::kFailed, problem);
}

int ConformanceReport::count(CaseStatus status) const {
  int n = 0;
  for (const CaseResult& r : results) n += r.status == status ? 1 : 0;
  return n;
}

ConformanceReport run_conformance(const AttentionBackend& backend,
                                  const ConformanceOptions& options) {
  const BackendCapabilities& caps = backend.capabilities();
  Platform platform = cpu_platform();
  if (caps.platform == PlatformKind::kCuda) {
    std::optional<Platform> gpu = local_cuda_platform();
    if (!gpu) {
      throw Error(
          ErrorCode::kUnsupported,
          fmt::format("backend {} runs on CUDA, and this binary sees no CUDA device "
                      "(built with CUDA: {})",
                      backend.name(), cuda_architectures_in_binary().empty() ? "no" : "yes"));
    }
    platform = *gpu;
  }
  std::unique_ptr<DeviceMemory> owned;
  DeviceMemory* memory = options.memory;
  if (memory == nullptr) {
    owned = make_device_memory(caps.platform);
    memory = owned.get();
  }
  ConformanceReport report;
  report.backend = std::string(backend.name());
  report.platform = platform.to_string();
  report.budget = options.budget;
  for (const ConformanceCase& c : generate_cases(backend, options.budget, options.seed)) {
    if (!options.filter.empty() && c.name.find(options.filter) == std::string::npos) continue;
    report.results.push_back(run_case(backend, c, platform, *memory));
  }
  return report;
}

}  // namespace attnkit::conformance
