// ggml_fa_peer: times ggml's CPU flash attention (ggml_flash_attn_ext on the CPU backend) on
// one attention shape, then checks the output against a double-precision reference. The
// driver of bench/ggml_peer.py, which builds it against a ggml checkout (CMakeLists.txt here)
// and runs it once per shape and KV type; the method and its caveats are described there.
//
//   ggml_fa_peer --heads H --kv-heads KV --head-size D --batch B --context CTX
//                --query-len Q --kv-type f16|bf16 [--causal 0|1] [--sinks 0|1]
//                [--threads N] [--warmup N] [--repeats N] [--min-rotate-mib M]
//
// The op's inputs, as llama.cpp hands them to it (ggml's dimension order, innermost first):
//   q     f32      [D, Q, H, B]     B sequences in the 4th dimension, Q query tokens each
//   k, v  KV type  [D, CTX, KV, B]  contiguous; query head h reads KV head h / (H / KV)
//   mask  f16      [CTX, Q, 1, 1]   only with --causal 1: 0 where query j (at position
//                                   CTX - Q + j) sees key i (i <= CTX - Q + j), -inf
//                                   elsewhere; broadcast over heads and sequences
//   sinks f32      [H]              only with --sinks 1
// Without --causal every key is visible and there is no mask at all (decode: the one query
// token of a sequence is its last position).
//
// K and V are replicated into enough "layers" that together they reach --min-rotate-mib
// (default 256 MiB, like attnkit's benchmark; at most 64 layers), each layer with its own
// random data and its own one-node graph, and successive calls visit successive layers, so
// a call does not find the KV of the previous one in the last-level cache. Each timed call is
// one ggml_backend_graph_compute, timed with std::chrono::steady_clock.
//
// The buffer holding every tensor is advised for transparent huge pages before it is filled
// (madvise MADV_HUGEPAGE, Linux), as attnkit's benchmark allocates its caches and its read
// ceiling (attnkit/core/host_memory.h), so that both sides read through the same kind of
// pages; ATTNKIT_HUGE_PAGES=0 (the variable attnkit reads) leaves 4 KiB pages, as ggml
// itself does.
//
// Prints one JSON object on stdout: the per-call times, their median and minimum, the ggml
// build (commit, compiled-in CPU features), the layers and the result of the check. Exit
// status: 0 when it ran (whatever the check found), 1 on a ggml failure, 2 on bad arguments.

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

struct Options {
  int heads = 0, kv_heads = 0, head_size = 0, batch = 1, context = 0, query_len = 1;
  int causal = 0, sinks = 0;
  int threads = 2, warmup = 2, repeats = 9, min_rotate_mib = 256;
  std::string kv_type;
};

// The options (CLI11 checks each value against its range and names the bad one).
bool parse_options(int argc, char** argv, Options& o) {
  CLI::App app{"times ggml's CPU flash attention on one shape", "ggml_fa_peer"};
  const auto positive = CLI::Range(1, 1 << 30);
  app.add_option("--heads", o.heads, "query heads")->required()->check(positive);
  app.add_option("--kv-heads", o.kv_heads, "KV heads (divides --heads)")
      ->required()
      ->check(positive);
  app.add_option("--head-size", o.head_size, "head size")->required()->check(positive);
  app.add_option("--batch", o.batch, "sequences")->check(positive);
  app.add_option("--context", o.context, "keys per sequence")->required()->check(positive);
  app.add_option("--query-len", o.query_len, "query tokens per sequence")->check(positive);
  app.add_option("--kv-type", o.kv_type, "KV type")
      ->required()
      ->check(CLI::IsMember({"f16", "bf16"}));
  app.add_option("--causal", o.causal, "causal mask")->check(CLI::Range(0, 1));
  app.add_option("--sinks", o.sinks, "attention sinks")->check(CLI::Range(0, 1));
  app.add_option("--threads", o.threads, "threads of the CPU backend")->check(positive);
  app.add_option("--warmup", o.warmup, "untimed calls")->check(CLI::Range(0, 1 << 30));
  app.add_option("--repeats", o.repeats, "timed calls")->check(positive);
  app.add_option("--min-rotate-mib", o.min_rotate_mib, "KV copies rotated through")
      ->check(CLI::Range(0, 1 << 30));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return false;
  }
  if (o.heads % o.kv_heads != 0 || o.query_len > o.context) {
    std::fprintf(stderr,
                 "--kv-heads %d must divide --heads %d, and --query-len %d must be "
                 "<= --context %d\n",
                 o.kv_heads, o.heads, o.query_len, o.context);
    return false;
  }
  return true;
}

// splitmix64: fast, and every layer gets its own stream (distinct data per layer, so no
// page of one layer can be deduplicated against another's by the host).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * 0x1p-24f;
  }

 private:
  uint64_t state_;
};

void fill_f32(ggml_tensor* t, Rng& rng, float lo, float hi) {
  auto* p = static_cast<float*>(t->data);
  for (int64_t i = 0; i < ggml_nelements(t); ++i) p[i] = rng.uniform(lo, hi);
}

// Uniform [-1, 1) values rounded to the tensor's type (f16 or bf16).
void fill_kv(ggml_tensor* t, Rng& rng) {
  std::vector<float> chunk(1 << 16);
  const int64_t n = ggml_nelements(t);
  for (int64_t i = 0; i < n; i += static_cast<int64_t>(chunk.size())) {
    const int64_t m = std::min<int64_t>(static_cast<int64_t>(chunk.size()), n - i);
    for (int64_t j = 0; j < m; ++j) chunk[j] = rng.uniform(-1.0f, 1.0f);
    if (t->type == GGML_TYPE_F16) {
      ggml_fp32_to_fp16_row(chunk.data(), static_cast<ggml_fp16_t*>(t->data) + i, m);
    } else {
      ggml_fp32_to_bf16_row(chunk.data(), static_cast<ggml_bf16_t*>(t->data) + i, m);
    }
  }
}

// Rows [row0, row0 + rows) of a contiguous f16/bf16 tensor as f32.
std::vector<float> rows_as_f32(const ggml_tensor* t, int64_t row0, int64_t rows) {
  const int64_t n = rows * t->ne[0];
  std::vector<float> out(static_cast<size_t>(n));
  if (t->type == GGML_TYPE_F16) {
    ggml_fp16_to_fp32_row(static_cast<const ggml_fp16_t*>(t->data) + row0 * t->ne[0], out.data(),
                          n);
  } else {
    ggml_bf16_to_fp32_row(static_cast<const ggml_bf16_t*>(t->data) + row0 * t->ne[0], out.data(),
                          n);
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Check {
  double nmse = 0.0;   // sum (out - ref)^2 / sum ref^2 over the checked rows
  int rows = 0;        // (sequence, head, query) rows compared
  bool finite = true;  // every element of the output is finite
};

// Compares one layer's output against attention computed in double from the same inputs:
// every head, for the first and last sequence and the first, middle and last query token
// (the causal rows that see one key, half the keys and all of them). The reference follows
// the mask rule itself (positions), not the mask tensor, so a wrong mask shows up too.
Check check_output(const Options& o, const ggml_tensor* q, const ggml_tensor* k,
                   const ggml_tensor* v, const ggml_tensor* sinks, const ggml_tensor* out) {
  const int64_t D = o.head_size, Q = o.query_len, H = o.heads, KV = o.kv_heads;
  const int64_t CTX = o.context, B = o.batch, group = H / KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const auto* qd = static_cast<const float*>(q->data);
  const auto* od = static_cast<const float*>(out->data);
  const float* sd = sinks ? static_cast<const float*>(sinks->data) : nullptr;

  Check c;
  for (int64_t i = 0; i < ggml_nelements(out); ++i) c.finite = c.finite && std::isfinite(od[i]);

  std::vector<int64_t> seqs{0, B - 1}, tokens{0, Q / 2, Q - 1};
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());

  double err = 0.0, norm = 0.0;
  std::vector<double> s(static_cast<size_t>(CTX)), ref(static_cast<size_t>(D));
  for (const int64_t b : seqs) {
    for (int64_t kvh = 0; kvh < KV; ++kvh) {
      // K and V rows of this sequence and KV head: row (i, kvh, b) is i + CTX * (kvh + KV * b).
      const int64_t row0 = CTX * (kvh + KV * b);
      const std::vector<float> kf = rows_as_f32(k, row0, CTX);
      const std::vector<float> vf = rows_as_f32(v, row0, CTX);
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        for (const int64_t j : tokens) {
          const float* qr = qd + ((b * H + h) * Q + j) * D;
          const int64_t visible = o.causal ? CTX - Q + j + 1 : CTX;
          double m = sd ? sd[h] : -INFINITY;
          for (int64_t i = 0; i < visible; ++i) {
            double dot = 0.0;
            for (int64_t e = 0; e < D; ++e) dot += static_cast<double>(qr[e]) * kf[i * D + e];
            s[i] = dot * scale;
            m = std::max(m, s[i]);
          }
          double den = sd ? std::exp(sd[h] - m) : 0.0;
          std::fill(ref.begin(), ref.end(), 0.0);
          for (int64_t i = 0; i < visible; ++i) {
            const double p = std::exp(s[i] - m);
            den += p;
            for (int64_t e = 0; e < D; ++e) ref[e] += p * vf[i * D + e];
          }
          // The op's output is [D, H, Q, B]: head h of token j of sequence b.
          const float* got = od + ((b * Q + j) * H + h) * D;
          for (int64_t e = 0; e < D; ++e) {
            const double r = ref[e] / den;
            err += (got[e] - r) * (got[e] - r);
            norm += r * r;
          }
          ++c.rows;
        }
      }
    }
  }
  c.nmse = norm > 0.0 ? err / norm : INFINITY;
  return c;
}

// The x86/ARM features the CPU backend was compiled with (ggml_cpu_has_* are compile-time).
std::string cpu_features() {
  const std::pair<const char*, int (*)()> features[] = {
      {"AVX", ggml_cpu_has_avx},
      {"AVX2", ggml_cpu_has_avx2},
      {"F16C", ggml_cpu_has_f16c},
      {"FMA", ggml_cpu_has_fma},
      {"AVX512", ggml_cpu_has_avx512},
      {"AVX512_BF16", ggml_cpu_has_avx512_bf16},
      {"AVX512_VNNI", ggml_cpu_has_avx512_vnni},
      {"NEON", ggml_cpu_has_neon},
      {"SVE", ggml_cpu_has_sve},
  };
  std::string s;
  for (const auto& [name, has] : features) {
    if (has()) s += (s.empty() ? "" : " ") + std::string(name);
  }
  return s.empty() ? "none" : s;
}

// Advises the whole 4 KiB pages of [base, base + bytes) for transparent huge pages unless
// ATTNKIT_HUGE_PAGES is 0/off/false; returns whether it did.
bool advise_huge_pages(void* base, size_t bytes) {
  const char* env = std::getenv("ATTNKIT_HUGE_PAGES");
  if (env != nullptr) {
    const std::string v = env;
    if (v == "0" || v == "off" || v == "false") return false;
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kPage = 4096;
  const auto begin = (reinterpret_cast<uintptr_t>(base) + kPage - 1) / kPage * kPage;
  const auto end = (reinterpret_cast<uintptr_t>(base) + bytes) / kPage * kPage;
  return end > begin && madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0;
#else
  return false;
#endif
}

int fail(const char* what) {
  std::fprintf(stderr, "ggml_fa_peer: %s\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, o)) return 2;
  const ggml_type kv_type = o.kv_type == "f16" ? GGML_TYPE_F16 : GGML_TYPE_BF16;
  const int64_t D = o.head_size, Q = o.query_len, H = o.heads, KV = o.kv_heads;
  const int64_t CTX = o.context, B = o.batch;
  const double layer_bytes =
      2.0 * static_cast<double>(D * CTX * KV * B) * static_cast<double>(ggml_type_size(kv_type));
  const int layers =
      std::clamp(static_cast<int>(std::ceil(o.min_rotate_mib * 1048576.0 / layer_bytes)), 1, 64);

  ggml_backend_t backend = ggml_backend_cpu_init();
  if (!backend) return fail("ggml_backend_cpu_init failed");
  ggml_backend_cpu_set_n_threads(backend, o.threads);

  // Metadata only (no_alloc): the tensors' data go into one backend buffer below.
  constexpr size_t kGraphSize = 16;  // one node and its five sources
  const size_t n_tensors = 3 + 3 * static_cast<size_t>(layers);
  ggml_init_params params = {};
  params.mem_size = n_tensors * ggml_tensor_overhead() +
                    static_cast<size_t>(layers) * ggml_graph_overhead_custom(kGraphSize, false) +
                    4096;
  params.no_alloc = true;
  ggml_context* ctx = ggml_init(params);
  if (!ctx) return fail("ggml_init failed");

  ggml_tensor* q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, Q, H, B);
  ggml_tensor* mask = o.causal ? ggml_new_tensor_4d(ctx, GGML_TYPE_F16, CTX, Q, 1, 1) : nullptr;
  ggml_tensor* sinks = o.sinks ? ggml_new_tensor_1d(ctx, GGML_TYPE_F32, H) : nullptr;
  std::vector<ggml_tensor*> ks, vs, outs;
  std::vector<ggml_cgraph*> graphs;
  for (int l = 0; l < layers; ++l) {
    ks.push_back(ggml_new_tensor_4d(ctx, kv_type, D, CTX, KV, B));
    vs.push_back(ggml_new_tensor_4d(ctx, kv_type, D, CTX, KV, B));
    ggml_tensor* out = ggml_flash_attn_ext(ctx, q, ks.back(), vs.back(), mask,
                                           1.0f / std::sqrt(static_cast<float>(D)), 0.0f, 0.0f);
    ggml_flash_attn_ext_add_sinks(out, sinks);
    ggml_flash_attn_ext_set_prec(out, GGML_PREC_F32);  // what llama.cpp asks for
    outs.push_back(out);
    graphs.push_back(ggml_new_graph_custom(ctx, kGraphSize, false));
    ggml_build_forward_expand(graphs.back(), out);
  }
  if (!ggml_backend_supports_op(backend, outs[0])) {
    return fail("the CPU backend does not support this flash attention op");
  }
  ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, backend);
  if (!buffer) return fail("could not allocate the tensors");
  if (!ggml_backend_buffer_is_host(buffer)) return fail("the CPU buffer is not host memory");
  const bool huge_pages =
      advise_huge_pages(ggml_backend_buffer_get_base(buffer), ggml_backend_buffer_get_size(buffer));

  Rng rng(0x5EED);
  fill_f32(q, rng, -1.0f, 1.0f);
  // Sinks spread like ggml's own flash attention test ([-10, 10]): some heads' sinks take
  // most of the weight, so a sink that is left out or misapplied changes the output.
  if (sinks) fill_f32(sinks, rng, -10.0f, 10.0f);
  if (mask) {
    auto* m = static_cast<ggml_fp16_t*>(mask->data);
    const ggml_fp16_t zero = ggml_fp32_to_fp16(0.0f), minus_inf = ggml_fp32_to_fp16(-INFINITY);
    for (int64_t j = 0; j < Q; ++j) {
      for (int64_t i = 0; i < CTX; ++i) m[j * CTX + i] = i <= CTX - Q + j ? zero : minus_inf;
    }
  }
  for (int l = 0; l < layers; ++l) {
    Rng layer_rng(1000 + static_cast<uint64_t>(l));
    fill_kv(ks[l], layer_rng);
    fill_kv(vs[l], layer_rng);
  }

  auto compute = [&](size_t layer) {
    return ggml_backend_graph_compute(backend, graphs[layer % graphs.size()]) ==
           GGML_STATUS_SUCCESS;
  };
  size_t next = 0;
  for (int i = 0; i < o.warmup; ++i) {
    if (!compute(next++)) return fail("ggml_backend_graph_compute failed");
  }
  std::vector<double> ms;
  for (int i = 0; i < o.repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = compute(next++);
    const auto t1 = std::chrono::steady_clock::now();
    if (!ok) return fail("ggml_backend_graph_compute failed");
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  // Layer 0 once more, untimed, so that its output is the one the check reads.
  if (!compute(0)) return fail("ggml_backend_graph_compute failed");
  const Check check = check_output(o, q, ks[0], vs[0], sinks, outs[0]);

  std::printf("{\"ggml_commit\": \"%s\", \"cpu_features\": \"%s\", \"threads\": %d, ",
              ggml_commit(), cpu_features().c_str(), o.threads);
  std::printf("\"layers\": %d, \"layer_mib\": %.3f, \"huge_pages_advised\": %s, ", layers,
              layer_bytes / 1048576.0, huge_pages ? "true" : "false");
  std::printf("\"warmup\": %d, \"ms\": [", o.warmup);
  for (size_t i = 0; i < ms.size(); ++i) std::printf("%s%.6f", i ? ", " : "", ms[i]);
  std::printf("], \"median_ms\": %.6f, \"min_ms\": %.6f, ", median(ms),
              *std::min_element(ms.begin(), ms.end()));
  // NaN or infinite (no reference norm) has no JSON number: null.
  char nmse[32] = "null";
  if (std::isfinite(check.nmse)) std::snprintf(nmse, sizeof(nmse), "%.6e", check.nmse);
  std::printf("\"check_rows\": %d, \"check_nmse\": %s, \"finite\": %s}\n", check.rows, nmse,
              check.finite ? "true" : "false");

  ggml_backend_buffer_free(buffer);
  ggml_free(ctx);
  ggml_backend_free(backend);
  return 0;
}
