#include "attention_case.h"

#include <sstream>

namespace attnkit::testing {
namespace {

size_t bytes_of(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
      return 4;
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      return 2;
    default:
      return 1;
  }
}

}  // namespace

std::string CaseSpec::describe() const {
  std::ostringstream os;
  os << "heads " << num_heads << "/" << num_kv_heads << " d " << head_size << "/" << head_size_v
     << " q " << to_string(q_dtype) << " kv " << to_string(kv_dtype) << " block " << block_size
     << (hnd ? " HND" : " NHD") << (contiguous ? " contiguous" : "") << (mla ? " mla" : "")
     << (causal ? " causal" : " non-causal") << " window " << sliding_window << " chunk "
     << chunk_size << " cap " << soft_cap << (sinks ? " sinks" : "") << " seed " << seed << " lens";
  for (size_t i = 0; i < q_lens.size(); ++i) os << " " << q_lens[i] << "/" << kv_lens[i];
  return os.str();
}

Tolerance tolerance_for(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
      return {1e-4, 1e-4};
    case ScalarType::kFloat16:
      return {2e-4, 1.5e-3};  // fp16 output rounding: 2^-11 relative
    default:
      return {1e-3, 6e-3};  // bf16 output rounding: 2^-9 relative
  }
}

AttentionCase::AttentionCase(const CaseSpec& spec) : spec_(spec) {
  std::mt19937_64 rng(spec.seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int H = spec.num_heads, KV = spec.num_kv_heads, d = spec.head_size;
  const int dv = spec.head_size_v;
  const int B = static_cast<int>(spec.q_lens.size());
  // Scores with standard deviation ~1 so the softmax is neither flat nor one-hot.
  scale_ = 3.0f / std::sqrt(static_cast<float>(d));

  query_start_loc_.assign(1, 0);
  for (int s = 0; s < B; ++s) query_start_loc_.push_back(query_start_loc_.back() + spec.q_lens[s]);
  seq_lens_.assign(spec.kv_lens.begin(), spec.kv_lens.end());
  num_tokens_ = query_start_loc_.back();

  // Queries and outputs with padded token strides (exercises the strides).
  q_token_stride_ = int64_t{H} * d + 32;
  o_token_stride_ = int64_t{H} * dv + 16;
  q_.assign(static_cast<size_t>(std::max<int64_t>(num_tokens_ * q_token_stride_, 1)) *
                bytes_of(spec.q_dtype),
            0);
  for (int t = 0; t < num_tokens_; ++t) {
    for (int i = 0; i < H * d; ++i)
      store_from_float(q_.data(), spec.q_dtype, t * q_token_stride_ + i, uni(rng));
  }
  out_.assign(static_cast<size_t>(std::max<int64_t>(num_tokens_ * o_token_stride_, 1)) *
                  bytes_of(spec.q_dtype),
              0);

  // The cache: every element random (unused slots too), physical blocks shuffled.
  const size_t kvb = bytes_of(spec.kv_dtype);
  const float k_amp = 1.0f / spec.k_scale, v_amp = 1.0f / spec.v_scale;  // MLA: no V
  if (spec.contiguous) {
    kv_start_loc_.assign(1, 0);
    for (int s = 0; s + 1 < B; ++s)
      kv_start_loc_.push_back(kv_start_loc_.back() + spec.kv_lens[s] + spec.contiguous_gap);
    const int64_t rows = kv_start_loc_.back() + spec.kv_lens.back() + spec.contiguous_gap;
    k_token_stride_ = int64_t{KV} * d;
    k_head_stride_ = d;
    v_token_stride_ = int64_t{KV} * dv;
    v_head_stride_ = dv;
    k_.resize(static_cast<size_t>(rows * k_token_stride_) * kvb);
    v_.resize(static_cast<size_t>(rows * v_token_stride_) * kvb);
  } else {
    for (int s = 0; s < B; ++s) {
      max_blocks_ =
          std::max(max_blocks_, (spec.kv_lens[s] + spec.block_size - 1) / spec.block_size);
    }
    max_blocks_ = std::max(max_blocks_, 1);
    num_blocks_ = B * max_blocks_ + 2;
    std::vector<int32_t> physical(static_cast<size_t>(num_blocks_));
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), rng);
    block_table_.assign(static_cast<size_t>(B) * max_blocks_, 0);
    int next = 0;
    for (int s = 0; s < B; ++s) {
      const int used = (spec.kv_lens[s] + spec.block_size - 1) / spec.block_size;
      for (int b = 0; b < used; ++b)
        block_table_[static_cast<size_t>(s) * max_blocks_ + b] = physical[next++];
    }
    const int bs = spec.block_size;
    const int vw = spec.mla ? d : dv;  // MLA: V lives inside the K rows
    if (spec.hnd) {
      k_head_stride_ = int64_t{bs} * d;
      k_token_stride_ = d;
      v_head_stride_ = int64_t{bs} * vw;
      v_token_stride_ = vw;
    } else {
      k_token_stride_ = int64_t{KV} * d;
      k_head_stride_ = d;
      v_token_stride_ = int64_t{KV} * vw;
      v_head_stride_ = vw;
    }
    k_block_stride_ = int64_t{bs} * KV * d;
    v_block_stride_ = int64_t{bs} * KV * vw;
    k_.resize(static_cast<size_t>(num_blocks_ * k_block_stride_) * kvb);
    if (!spec.mla) v_.resize(static_cast<size_t>(num_blocks_ * v_block_stride_) * kvb);
  }
  for (size_t i = 0; i < k_.size() / kvb; ++i) {
    store_from_float(k_.data(), spec.kv_dtype, static_cast<int64_t>(i), uni(rng) * k_amp);
  }
  for (size_t i = 0; i < v_.size() / kvb; ++i) {
    store_from_float(v_.data(), spec.kv_dtype, static_cast<int64_t>(i), uni(rng) * v_amp);
  }
  if (spec.mla) {
    v_block_stride_ = k_block_stride_;
    v_token_stride_ = k_token_stride_;
    v_head_stride_ = k_head_stride_;
  }
  if (spec.sinks) {
    std::uniform_real_distribution<float> sink_dist(-1.0f, 3.0f);
    for (int h = 0; h < H; ++h) sinks_.push_back(sink_dist(rng));
  }
  compute_expected();
}

PagedAttentionParams AttentionCase::params() {
  PagedAttentionParams p;
  p.q = q_.data();
  p.out = out_.data();
  p.q_dtype = spec_.q_dtype;
  p.q_token_stride = q_token_stride_;
  p.q_head_stride = spec_.head_size;
  p.o_token_stride = o_token_stride_;
  p.o_head_stride = spec_.head_size_v;
  p.k_cache = k_.data();
  p.v_cache = spec_.mla ? k_.data() : v_.data();
  p.kv_dtype = spec_.kv_dtype;
  p.k_scale = spec_.k_scale;
  p.v_scale = spec_.mla ? spec_.k_scale : spec_.v_scale;
  p.k_block_stride = k_block_stride_;
  p.k_token_stride = k_token_stride_;
  p.k_head_stride = k_head_stride_;
  p.v_block_stride = v_block_stride_;
  p.v_token_stride = v_token_stride_;
  p.v_head_stride = v_head_stride_;
  p.num_seqs = static_cast<int>(seq_lens_.size());
  p.query_start_loc = query_start_loc_.data();
  p.seq_lens = seq_lens_.data();
  if (spec_.contiguous) {
    p.kv_start_loc = kv_start_loc_.data();
  } else {
    p.block_table = block_table_.data();
    p.block_table_stride = max_blocks_;
    p.block_size = spec_.block_size;
  }
  p.num_heads = spec_.num_heads;
  p.num_kv_heads = spec_.num_kv_heads;
  p.head_size = spec_.head_size;
  p.head_size_v = spec_.head_size_v;
  p.scale = scale_;
  p.causal = spec_.causal;
  p.sliding_window = spec_.sliding_window;
  p.chunk_size = spec_.chunk_size;
  p.soft_cap = spec_.soft_cap;
  p.sinks = spec_.sinks ? sinks_.data() : nullptr;
  return p;
}

int64_t AttentionCase::k_offset(int s, int k, int kvh) const {
  if (spec_.contiguous) return (kv_start_loc_[s] + k) * k_token_stride_ + kvh * k_head_stride_;
  const int64_t blk = block_table_[static_cast<size_t>(s) * max_blocks_ + k / spec_.block_size];
  return blk * k_block_stride_ + (k % spec_.block_size) * k_token_stride_ + kvh * k_head_stride_;
}

int64_t AttentionCase::v_offset(int s, int k, int kvh) const {
  if (spec_.contiguous) return (kv_start_loc_[s] + k) * v_token_stride_ + kvh * v_head_stride_;
  const int64_t blk = block_table_[static_cast<size_t>(s) * max_blocks_ + k / spec_.block_size];
  return blk * v_block_stride_ + (k % spec_.block_size) * v_token_stride_ + kvh * v_head_stride_;
}

double AttentionCase::key(int s, int k, int kvh, int d) const {
  return double{load_as_float(k_.data(), spec_.kv_dtype, k_offset(s, k, kvh) + d)} * spec_.k_scale;
}

double AttentionCase::value(int s, int k, int kvh, int d) const {
  const std::vector<uint8_t>& v = spec_.mla ? k_ : v_;
  // MLA's V is the latent's prefix, stored once with k_scale.
  const float scale = spec_.mla ? spec_.k_scale : spec_.v_scale;
  return double{load_as_float(v.data(), spec_.kv_dtype, v_offset(s, k, kvh) + d)} * scale;
}

void AttentionCase::compute_expected() {
  const int H = spec_.num_heads, d = spec_.head_size, dv = spec_.head_size_v;
  const int KV = spec_.num_kv_heads;
  const int group = H / KV;
  expected_.assign(static_cast<size_t>(num_tokens_) * H * dv, 0.0);
  std::vector<double> qrow(static_cast<size_t>(d));
  for (size_t s = 0; s < seq_lens_.size(); ++s) {
    const int q_len = spec_.q_lens[s], kv_len = seq_lens_[s];
    const int si = static_cast<int>(s);
    // Dequantised K [kv_len, KV, d] and V [kv_len, KV, dv] of this request.
    std::vector<double> K(static_cast<size_t>(kv_len) * KV * d),
        V(static_cast<size_t>(kv_len) * KV * dv);
    for (int k = 0; k < kv_len; ++k) {
      for (int h = 0; h < KV; ++h) {
        for (int x = 0; x < d; ++x) K[(static_cast<size_t>(k) * KV + h) * d + x] = key(si, k, h, x);
        for (int x = 0; x < dv; ++x)
          V[(static_cast<size_t>(k) * KV + h) * dv + x] = value(si, k, h, x);
      }
    }
    for (int j = 0; j < q_len; ++j) {
      const int t = query_start_loc_[s] + j;
      const int pos = kv_len - q_len + j;
      for (int h = 0; h < H; ++h) {
        const int kvh = h / group;
        for (int x = 0; x < d; ++x) {
          qrow[static_cast<size_t>(x)] =
              load_as_float(q_.data(), spec_.q_dtype, t * q_token_stride_ + h * d + x);
        }
        // Materialised scores and mask over every key of the request.
        std::vector<double> score(static_cast<size_t>(kv_len));
        std::vector<bool> visible(static_cast<size_t>(kv_len));
        for (int k = 0; k < kv_len; ++k) {
          bool ok = true;
          if (spec_.causal) {
            ok = k <= pos;
            if (spec_.sliding_window > 0) ok = ok && k > pos - spec_.sliding_window;
            if (spec_.chunk_size > 0) ok = ok && k / spec_.chunk_size == pos / spec_.chunk_size;
          }
          visible[static_cast<size_t>(k)] = ok;
          const double* krow = &K[(static_cast<size_t>(k) * KV + kvh) * d];
          double dot = 0.0;
          for (int x = 0; x < d; ++x) dot += qrow[static_cast<size_t>(x)] * krow[x];
          double sc = double{scale_} * dot;
          if (spec_.soft_cap > 0) sc = spec_.soft_cap * std::tanh(sc / spec_.soft_cap);
          score[static_cast<size_t>(k)] = sc;
        }
        double m = -INFINITY;
        for (int k = 0; k < kv_len; ++k) {
          if (visible[static_cast<size_t>(k)]) m = std::max(m, score[static_cast<size_t>(k)]);
        }
        if (spec_.sinks) m = std::max(m, double{sinks_[static_cast<size_t>(h)]});
        if (m == -INFINITY) continue;  // sees nothing: zeros
        double denom = spec_.sinks ? std::exp(sinks_[static_cast<size_t>(h)] - m) : 0.0;
        double* out = &expected_[(static_cast<size_t>(t) * H + h) * dv];
        for (int k = 0; k < kv_len; ++k) {
          if (!visible[static_cast<size_t>(k)]) continue;
          const double w = std::exp(score[static_cast<size_t>(k)] - m);
          denom += w;
          const double* vrow = &V[(static_cast<size_t>(k) * KV + kvh) * dv];
          for (int x = 0; x < dv; ++x) out[x] += w * vrow[x];
        }
        for (int x = 0; x < dv; ++x) out[x] /= denom;
      }
    }
  }
}

float AttentionCase::output(int t, int h, int d) const {
  return load_as_float(out_.data(), spec_.q_dtype,
                       t * o_token_stride_ + int64_t{h} * spec_.head_size_v + d);
}

void AttentionCase::clear_output() {
  // A recognisable non-zero pattern, so a kernel that skips a row is caught.
  for (size_t i = 0; i < out_.size() / bytes_of(spec_.q_dtype); ++i) {
    store_from_float(out_.data(), spec_.q_dtype, static_cast<int64_t>(i), 1234.5f);
  }
}

double AttentionCase::worst_violation(std::string* where) const {
  return worst_violation(where, tolerance_for(spec_.q_dtype));
}

double AttentionCase::worst_violation(std::string* where, Tolerance tol) const {
  const int H = spec_.num_heads, dv = spec_.head_size_v;
  double worst = -1.0;
  for (int t = 0; t < num_tokens_; ++t) {
    for (int h = 0; h < H; ++h) {
      for (int x = 0; x < dv; ++x) {
        const double want = expected_[(static_cast<size_t>(t) * H + h) * dv + x];
        const double got = output(t, h, x);
        const double excess = std::abs(got - want) - (tol.atol + tol.rtol * std::abs(want));
        if (!(excess <= 0.0) && (worst <= 0.0 || !(excess <= worst))) {
          if (worst <= 0.0 && where != nullptr) {
            *where = "token " + std::to_string(t) + " head " + std::to_string(h) + " dim " +
                     std::to_string(x) + ": got " + std::to_string(got) + " want " +
                     std::to_string(want);
          }
          worst = std::isnan(excess) ? INFINITY : excess;
        }
      }
    }
  }
  return worst;
}

}  // namespace attnkit::testing
