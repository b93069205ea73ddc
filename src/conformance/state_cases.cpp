#include "conformance/state_cases.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "attnkit/backend/state_params.h"
#include "attnkit/core/numeric.h"
#include "backend/state_ops.h"
#include "case_inputs.h"

namespace attnkit::conformance {
namespace {

// Two sizes per layer type: a small one, and one with odd widths and more heads/groups.
std::vector<StateLayerDims> dims_for(StateLayerType type, Budget budget) {
  std::vector<StateLayerDims> out;
  auto add = [&](auto&& set) {
    StateLayerDims d;
    d.type = type;
    set(d);
    out.push_back(d);
  };
  switch (type) {
    case StateLayerType::kMamba1:
      add([](StateLayerDims& d) {
        d.inner_size = 16, d.state_size = 4, d.dt_rank = 2, d.conv_kernel = 4;
      });
      add([](StateLayerDims& d) {
        d.inner_size = 40, d.state_size = 16, d.dt_rank = 3, d.conv_kernel = 2;
      });
      break;
    case StateLayerType::kMamba2:
      add([](StateLayerDims& d) {
        d.num_heads = 4, d.head_dim = 8, d.n_groups = 1, d.state_size = 8, d.conv_kernel = 4;
      });
      add([](StateLayerDims& d) {
        d.num_heads = 6, d.head_dim = 12, d.n_groups = 3, d.state_size = 5, d.conv_kernel = 3;
      });
      break;
    case StateLayerType::kGatedDeltaNet:
      add([](StateLayerDims& d) {
        d.num_k_heads = 2, d.head_k_dim = 16, d.num_heads = 2, d.head_dim = 16, d.conv_kernel = 4;
      });
      add([](StateLayerDims& d) {
        d.num_k_heads = 2, d.head_k_dim = 12, d.num_heads = 6, d.head_dim = 20, d.conv_kernel = 4;
      });
      break;
    case StateLayerType::kKimiDeltaAttention:
      add([](StateLayerDims& d) {
        d.num_k_heads = 2, d.head_k_dim = 16, d.num_heads = 2, d.head_dim = 16, d.conv_kernel = 4;
      });
      add([](StateLayerDims& d) {
        d.num_k_heads = 3, d.head_k_dim = 10, d.num_heads = 3, d.head_dim = 10, d.conv_kernel = 3;
      });
      break;
    case StateLayerType::kShortConv:
      add([](StateLayerDims& d) { d.inner_size = 32, d.conv_kernel = 3; });
      add([](StateLayerDims& d) { d.inner_size = 45, d.conv_kernel = 5; });
      break;
    case StateLayerType::kLinearAttention:
      add([](StateLayerDims& d) { d.num_heads = 2, d.head_dim = 16; });
      add([](StateLayerDims& d) { d.num_heads = 5, d.head_dim = 12; });
      break;
    case StateLayerType::kRgLru:
      add([](StateLayerDims& d) { d.inner_size = 16, d.num_heads = 2, d.conv_kernel = 4; });
      add([](StateLayerDims& d) { d.inner_size = 30, d.num_heads = 5, d.conv_kernel = 2; });
      break;
  }
  if (budget == Budget::kQuick) out.resize(std::min<size_t>(out.size(), 2));
  return out;
}

std::string dims_name(const StateLayerDims& d) {
  std::string s = d.describe();
  std::replace(s.begin(), s.end(), ' ', '_');
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  return s;
}

// A state block: conv then recurrent part, as make_state_cache_view lays it out.
struct StateViews {
  TensorView conv, recurrent;
};

StateViews views_of(void* base, const StateLayerDims& d, size_t page, int num_blocks,
                    Device device) {
  StateViews v;
  auto make = [&](void* data, const std::vector<int>& shape) {
    TensorView t;
    t.data = data;
    t.dtype = ScalarType::kFloat32;
    t.device = device;
    t.ndim = static_cast<int>(shape.size()) + 1;
    t.shape[0] = num_blocks;
    t.strides[0] = static_cast<int64_t>(page / sizeof(float));
    int64_t stride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      t.shape[i + 1] = shape[i];
      t.strides[i + 1] = stride;
      stride *= shape[i];
    }
    return t;
  };
  if (d.conv_elems() > 0) v.conv = make(base, d.conv_shape());
  if (d.recurrent_elems() > 0) {
    v.recurrent =
        make(static_cast<unsigned char*>(base) + d.recurrent_offset(), d.recurrent_shape());
  }
  return v;
}

// Relative L2 error of `got` against `want` (NaN when got holds a NaN or inf).
double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return NAN;
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

class StateRun {
 public:
  StateRun(const AttentionBackend& backend, const ConformanceCase& c, DeviceMemory& memory)
      : backend_(backend), c_(c), memory_(memory), dims_(*c.layer.state) {
    const size_t n = c.seq_lens.size();
    page_ = (dims_.bytes() + 15) / 16 * 16;
    num_blocks_ = static_cast<int>(n) + 3;  // + the null block and two nobody owns
    std::mt19937_64 rng(c.seed);
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks_ - 1));
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), rng);
    blocks_.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const ScalarType type = scalar_type_of(c.layer.dtype);
    for (int len : c.seq_lens) {
      std::vector<float> rows(static_cast<size_t>(len) * static_cast<size_t>(dims_.input_width()));
      for (float& v : rows) v = round_trip(type, u(rng));
      inputs_.push_back(std::move(rows));
    }
  }

  // Outputs per request after running the batch with each request's steps of `chunk`
  // tokens (0 = the whole sequence in one step; else the case's pattern or 1).
  std::vector<std::vector<float>> run(const std::vector<int>& pattern, std::string* untouched) {
    const size_t bytes = page_ * static_cast<size_t>(num_blocks_);
    DeviceBuffer cache(memory_, bytes);
    // NaN everywhere: a backend that does not start a request from zero, or reads a block
    // it does not own, produces NaN.
    std::vector<float> garbage(bytes / sizeof(float), std::nanf(""));
    memory_.copy_to_device(cache.data(), garbage.data(), bytes);
    const StateViews views = views_of(cache.data(), dims_, page_, num_blocks_, memory_.device());
    KvCacheTensors tensors{views.conv, views.recurrent, KvLayout::kNHD, 1};
    auto builder = backend_.make_builder({}, c_.layer);
    auto impl = backend_.make_impl(c_.layer);
    const size_t n = c_.seq_lens.size();
    const ScalarType type = scalar_type_of(c_.layer.dtype);
    const int in_w = dims_.input_width(), out_w = dims_.output_width();
    std::vector<std::vector<float>> out(n);
    std::vector<int> done(n, 0);
    for (int step = 0;; ++step) {
      CommonAttentionMetadata m;
      m.query_start_loc.push_back(0);
      std::vector<size_t> who;
      for (size_t i = 0; i < n; ++i) {
        const int left = c_.seq_lens[i] - done[i];
        if (left == 0) continue;
        const int want =
            pattern.empty() ? left : pattern[static_cast<size_t>(step) % pattern.size()];
        const int q = std::min(left, want);
        who.push_back(i);
        m.query_start_loc.push_back(m.query_start_loc.back() + q);
        m.seq_lens.push_back(done[i] + q);
        m.block_table.push_back(blocks_[i]);
        m.max_query_len = std::max(m.max_query_len, q);
        m.max_seq_len = std::max(m.max_seq_len, done[i] + q);
        for (int t = 0; t < q; ++t) m.slot_mapping.push_back(-1);
      }
      if (who.empty()) break;
      m.num_reqs = static_cast<int>(who.size());
      m.num_actual_tokens = m.query_start_loc.back();
      m.max_blocks_per_req = 1;
      m.block_size = 1;
      const int rows = m.num_actual_tokens;
      HostTensor in(type, {rows, in_w});
      int row = 0;
      for (size_t k = 0; k < who.size(); ++k) {
        const size_t i = who[k];
        const int q = m.query_start_loc[k + 1] - m.query_start_loc[k];
        for (int t = 0; t < q; ++t, ++row) {
          for (int x = 0; x < in_w; ++x) {
            store_from_float(
                in.data(), type, int64_t{row} * in_w + x,
                inputs_[i][static_cast<size_t>(done[i] + t) * static_cast<size_t>(in_w) +
                           static_cast<size_t>(x)]);
          }
        }
      }
      HostTensor o(type, {rows, out_w});
      DeviceBuffer din(memory_, in.nbytes()), dout(memory_, o.nbytes());
      memory_.copy_to_device(din.data(), in.data(), in.nbytes());
      TensorView iv = view_at(in, din.data(), memory_.device());
      TensorView ov = view_at(o, dout.data(), memory_.device());
      const AttentionMetadata& plan = builder->build(m);
      impl->forward(iv, {}, {}, tensors, plan, ov);
      memory_.synchronize();
      memory_.copy_to_host(o.data(), dout.data(), o.nbytes());
      row = 0;
      for (size_t k = 0; k < who.size(); ++k) {
        const size_t i = who[k];
        const int q = m.query_start_loc[k + 1] - m.query_start_loc[k];
        for (int t = 0; t < q; ++t, ++row) {
          for (int x = 0; x < out_w; ++x) {
            out[i].push_back(load_as_float(o.data(), type, int64_t{row} * out_w + x));
          }
        }
        done[i] += q;
      }
    }
    // Blocks nobody owns (and the null block) keep their bytes.
    std::vector<float> after(bytes / sizeof(float));
    memory_.copy_to_host(after.data(), cache.data(), bytes);
    for (int32_t b = 0; b < num_blocks_; ++b) {
      if (std::find(blocks_.begin(), blocks_.end(), b) != blocks_.end()) continue;
      const size_t first = static_cast<size_t>(b) * page_ / sizeof(float);
      for (size_t i = first; i < first + page_ / sizeof(float); ++i) {
        if (!std::isnan(after[i])) {
          *untouched = fmt::format("block {}, owned by no request, was written", b);
          break;
        }
      }
    }
    return out;
  }

  std::vector<std::vector<float>> dense() const {
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < c_.seq_lens.size(); ++i) {
      std::vector<float> o(static_cast<size_t>(c_.seq_lens[i] * dims_.output_width()));
      run_state_layer_dense(dims_, c_.layer.state_params, c_.seq_lens[i], inputs_[i].data(),
                            o.data());
      out.push_back(std::move(o));
    }
    return out;
  }

 private:
  const AttentionBackend& backend_;
  const ConformanceCase& c_;
  DeviceMemory& memory_;
  StateLayerDims dims_;
  size_t page_ = 0;
  int num_blocks_ = 0;
  std::vector<int32_t> blocks_;
  std::vector<std::vector<float>> inputs_;
};

}  // namespace

std::vector<ConformanceCase> generate_state_cases(const AttentionBackend& backend, Budget budget,
                                                  uint64_t seed) {
  const BackendCapabilities& caps = backend.capabilities();
  std::vector<ConformanceCase> cases;
  for (StateLayerType type : caps.state_layer_types) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      if (std::find(caps.dtypes.begin(), caps.dtypes.end(), dtype) == caps.dtypes.end()) continue;
      for (const StateLayerDims& dims : dims_for(type, budget)) {
        for (const auto& [lens, pattern] :
             std::vector<std::pair<std::vector<int>, std::vector<int>>>{
                 {{13, 1, 30}, {3, 5, 1, 7}},
                 {{2, 9}, {2}},
             }) {
          ConformanceCase c;
          c.name = fmt::format("state/{}/{}/lens={}/chunks={}", dims_name(dims), to_string(dtype),
                               fmt::join(lens, ","), fmt::join(pattern, ","));
          c.layer.kind = KvCacheKind::kMamba;
          c.layer.dtype = dtype;
          c.layer.kv_cache_dtype = resolve_kv_cache_dtype(KvCacheDType::kAuto, dtype);
          c.layer.state = dims;
          c.seq_lens = lens;
          c.query_lens = pattern;
          c.block_size = 1;
          c.seed = seed ^ std::hash<std::string>{}(c.name);
          std::mt19937_64 rng(c.seed);
          std::uniform_real_distribution<double> u(0.0, 1.0);
          for (const StateParamSegment& s : state_param_layout(dims)) {
            for (size_t i = 0; i < s.count; ++i)
              c.layer.state_params.push_back(state_param_value(s, u(rng)));
          }
          cases.push_back(std::move(c));
        }
      }
    }
  }
  return cases;
}

CaseResult run_state_case(const AttentionBackend& backend, const ConformanceCase& c,
                          const Platform& platform, DeviceMemory& memory) {
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
  if (!reasons.empty()) {
    return finish(CaseStatus::kSkipped, fmt::format("{}", fmt::join(reasons, "; ")));
  }
  StateRun run(backend, c, memory);
  std::string untouched;
  std::vector<std::vector<float>> whole, chunks, tokens;
  try {
    whole = run.run({}, &untouched);
    chunks = run.run(c.query_lens, &untouched);
    tokens = run.run({1}, &untouched);
  } catch (const std::exception& e) {
    return finish(CaseStatus::kFailed, fmt::format("backend threw: {}", e.what()));
  }
  const std::vector<std::vector<float>> dense = run.dense();
  std::vector<std::string> problems;
  for (size_t i = 0; i < dense.size(); ++i) {
    const double e = relative_l2(whole[i], dense[i]);
    r.output_error =
        std::isnan(e) || std::isnan(r.output_error) ? NAN : std::max(r.output_error, e);
    for (const auto* other : {&chunks, &tokens}) {
      const double d = relative_l2((*other)[i], whole[i]);
      r.cache_error = std::isnan(d) || std::isnan(r.cache_error) ? NAN : std::max(r.cache_error, d);
    }
  }
  if (!(r.output_error <= r.tolerance.output)) {
    problems.push_back(fmt::format("output against the dense form: error {:.3g} exceeds {:.3g}{}",
                                   r.output_error, r.tolerance.output,
                                   std::isnan(r.output_error) ? " (NaN: a state not started from "
                                                                "zero, or an unwritten output)"
                                                              : ""));
  }
  if (!(r.cache_error <= r.tolerance.output)) {
    problems.push_back(
        fmt::format("one prefill, chunks and single tokens disagree: error {:.3g} "
                    "exceeds {:.3g}",
                    r.cache_error, r.tolerance.output));
  }
  if (!untouched.empty()) problems.push_back(untouched);
  const std::string problem = fmt::format("{}", fmt::join(problems, "; "));
  return finish(problem.empty() ? CaseStatus::kPassed : CaseStatus::kFailed, problem);
}

}  // namespace attnkit::conformance
