// CUDA attention benchmark: CUDA_FLASH and CUDA_PAGED through the library path (builder +
// forward, cache update included) on the decode and prefill shapes of issue 8, against the
// device-to-device copy bandwidth measured in the same run.
//
//   cuda_attention_bench [--json FILE] [--quick] [--only TEXT] [--trace] [--shape
//   KIND,B,S,H,KVH,D[,sinks|,fp8]]...
//
// --trace (a build with ATTNKIT_FLASH_TRACE defined, see attnkit/kernels/flash_trace.h)
// also prints, per CUDA_FLASH shape, when the CTAs of one step pass each point of their
// life (earliest, median and latest CTA, in microseconds from the step's first CTA) and the
// host's time to issue one forward.
//
// --only runs just the shapes whose name contains TEXT (e.g. "decode b64 s2048"), for
// profiling one shape under ncu. --shape (repeatable) replaces the shapes by the
// given ones (KIND decode or prefill; batch, context, heads, KV heads, head size), run on
// CUDA_FLASH only (fp8: CUDA_PAGED): e.g. a context sweep to separate fixed from per-byte
// costs.
//
// Decode reports GB/s (K/V bytes read once + q/out) and % of copy bandwidth; prefill
// reports TFLOP/s with 4*b*h*s*s*d FLOPs, halved for causal. Inputs are random bf16; each
// shape rotates over several disjoint sets of KV blocks (>= ~2 GB in all) so that repeated
// runs do not measure the 60 MB L2. Each figure is the median of 7 timed batches. Shapes
// marked fp8 keep the cache in fp8 e4m3 (random values in [-1, 1], scales 1); only
// CUDA_PAGED runs them (CUDA_FLASH declares 16-bit caches only).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attnkit/build_config.h"
#include "attnkit/core/numeric.h"
#include "attnkit/kernels/flash_trace.h"
#include "attnkit/registry/registry.h"

#if ATTNKIT_HAS_CUDA
#include <cuda_runtime.h>

#include "cuda_timing.h"

namespace {

using namespace attnkit;
using namespace attnkit::bench;

// Fills `bytes` of device memory with random values in [-1, 1], stored as `encode` makes
// them (a 16 MiB random pattern per storage type, repeated; the values only need to be
// realistic, not independent).
template <typename E>
void fill_random(void* dst, size_t bytes, std::mt19937& rng, E (*encode)(float)) {
  static std::vector<E> pattern;
  if (pattern.empty()) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    pattern.resize((16u << 20) / sizeof(E));
    for (auto& v : pattern) v = encode(u(rng));
  }
  fill_repeated(dst, bytes, pattern);
}
void fill_random_bf16(void* dst, size_t bytes, std::mt19937& rng) {
  fill_random(dst, bytes, rng, float_to_bf16_bits);
}

struct Shape {
  std::string kind;  // "decode" or "prefill"
  int batch, context, heads, kv_heads, head_size;
  bool sinks = false;
  bool fp8 = false;  // KV cache in fp8 e4m3
  std::string name() const {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s b%d s%d h%d/%d d%d%s%s", kind.c_str(), batch, context, heads,
                  kv_heads, head_size, sinks ? " sinks" : "", fp8 ? " fp8kv" : "");
    return buf;
  }
};

#if defined(ATTNKIT_FLASH_TRACE)
// One step's CTA timeline (attnkit/kernels/flash_trace.h): `forward` runs steps back to back; the
// buffer then holds the last step's marks (every CTA overwrites its own). A merge mark counts only
// when it follows the same CTA's counter mark (an older step's merge by that CTA does not).
template <typename F>
void print_trace(F&& forward) {
  using namespace attnkit::cuda;
  uint64_t* buffer = flash_trace_buffer();
  const size_t n = static_cast<size_t>(kFlashTraceCtas) * kFlashTracePoints;
  check(cudaMemset(buffer, 0, n * sizeof(uint64_t)), "trace reset");
  check(cudaDeviceSynchronize(), "trace reset");
  constexpr int kSteps = 200;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i) forward(i);
  const auto t1 = std::chrono::steady_clock::now();
  check(cudaDeviceSynchronize(), "trace steps");
  std::vector<uint64_t> marks(n);
  check(cudaMemcpy(marks.data(), buffer, n * sizeof(uint64_t), cudaMemcpyDeviceToHost), "trace");
  uint64_t first = UINT64_MAX;
  for (int cta = 0; cta < kFlashTraceCtas; ++cta) {
    const uint64_t start = marks[static_cast<size_t>(cta) * kFlashTracePoints + kTraceStart];
    if (start != 0) first = std::min(first, start);
  }
  std::printf("  host: %.2f us to issue one forward (%d back to back)\n",
              std::chrono::duration<double, std::micro>(t1 - t0).count() / kSteps, kSteps);
  static const char* names[kFlashTracePoints] = {"start",        "waited",       "first tile",
                                                 "loop done",    "written",      "counted",
                                                 "merge issued", "merge loaded", "merged (last)"};
  for (int point = 0; point < kFlashTracePoints; ++point) {
    std::vector<double> us;
    for (int cta = 0; cta < kFlashTraceCtas; ++cta) {
      const uint64_t* row = marks.data() + static_cast<size_t>(cta) * kFlashTracePoints;
      const uint64_t t = row[point];
      if (t == 0 || row[kTraceStart] == 0 || t < first) continue;
      if (point > kTraceCounted && t < row[kTraceCounted]) {
        continue;
      }
      us.push_back(static_cast<double>(t - first) * 1e-3);
    }
    if (us.empty()) continue;
    std::sort(us.begin(), us.end());
    std::printf("  %-14s %5zu CTAs  earliest %7.2f  median %7.2f  latest %7.2f us\n", names[point],
                us.size(), us.front(), us[us.size() / 2], us.back());
  }
}
#endif

struct Result {
  Shape shape;
  std::string backend;
  double ms = 0, gbs = 0, pct_copy = 0, tflops = 0;
  double graph_ms = 0;  // the same forwards replayed from captured CUDA graphs
};

// Replays of `forward(set, ctx)` captured once per set into a CUDA graph (the execution
// contract, core/execution.h), timed like the eager calls: the host's launch cost drops to
// one cudaGraphLaunch per step.
template <typename F>
double graph_replay_ms(int sets, F&& forward) {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream), "stream");  // blocking: the timing events order with it
  std::vector<cudaGraphExec_t> graphs(static_cast<size_t>(sets));
  for (int set = 0; set < sets; ++set) {
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
    forward(set, ExecutionContext{stream});
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    check(cudaGraphInstantiate(&graphs[static_cast<size_t>(set)], graph, 0), "instantiate");
    check(cudaGraphDestroy(graph), "graph");
  }
  const double ms = median_ms([&](int i) {
    check(cudaGraphLaunch(graphs[static_cast<size_t>(i % sets)], stream), "replay");
  });
  check(cudaStreamSynchronize(stream), "replays");
  for (cudaGraphExec_t g : graphs) check(cudaGraphExecDestroy(g), "graph exec");
  check(cudaStreamDestroy(stream), "stream");
  return ms;
}

Result run_shape(const std::string& backend_name, const Shape& s, double copy_gbs,
                 std::mt19937& rng, bool trace) {
  const bool decode = s.kind == "decode";
  const int bs = 16, D = s.head_size, H = s.heads, KVH = s.kv_heads;
  const int q_len = decode ? 1 : s.context;
  const int T = s.batch * q_len;
  const int blocks_per_seq = (s.context + bs - 1) / bs;
  const size_t kv_bytes = s.fp8 ? 1 : 2;  // per cache element
  const ScalarType kv_type = s.fp8 ? ScalarType::kFp8E4M3 : ScalarType::kBFloat16;
  const size_t block_bytes = static_cast<size_t>(bs) * KVH * D * kv_bytes;
  const size_t set_bytes = static_cast<size_t>(s.batch) * blocks_per_seq * block_bytes * 2;
  const int sets = static_cast<int>(std::clamp<size_t>((size_t{2} << 30) / set_bytes + 1, 1, 8));
  const int total_blocks = sets * s.batch * blocks_per_seq;

  DeviceBuffer k_cache = device_buffer(static_cast<size_t>(total_blocks) * block_bytes);
  DeviceBuffer v_cache = device_buffer(static_cast<size_t>(total_blocks) * block_bytes);
  for (void* cache_ptr : {k_cache.data(), v_cache.data()}) {
    const size_t cache_bytes = static_cast<size_t>(total_blocks) * block_bytes;
    if (s.fp8) {
      fill_random(cache_ptr, cache_bytes, rng, float_to_fp8_e4m3);
    } else {
      fill_random_bf16(cache_ptr, cache_bytes, rng);
    }
  }
  DeviceBuffer q = device_buffer(static_cast<size_t>(T) * H * D * 2),
               out = device_buffer(static_cast<size_t>(T) * H * D * 2);
  DeviceBuffer key = device_buffer(static_cast<size_t>(T) * KVH * D * 2),
               value = device_buffer(static_cast<size_t>(T) * KVH * D * 2);
  fill_random_bf16(q.data(), static_cast<size_t>(T) * H * D * 2, rng);
  fill_random_bf16(key.data(), static_cast<size_t>(T) * KVH * D * 2, rng);
  fill_random_bf16(value.data(), static_cast<size_t>(T) * KVH * D * 2, rng);

  AttentionLayerParams layer;
  layer.num_heads = H;
  layer.num_kv_heads = KVH;
  layer.head_size = layer.head_size_v = D;
  layer.scale = 1.0f / std::sqrt(static_cast<float>(D));
  layer.dtype = DType::kBFloat16;
  if (s.fp8) layer.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  if (s.sinks) {
    std::uniform_real_distribution<float> u(-1.0f, 3.0f);
    for (int h = 0; h < H; ++h) layer.sinks.push_back(u(rng));
  }
  const auto backend = BackendRegistry().get(backend_name);
  KvCacheSpec spec;
  spec.block_size = bs;
  spec.num_kv_heads = KVH;
  spec.head_size = spec.head_size_v = D;
  spec.dtype = kv_type;
  auto impl = backend->make_impl(layer);

  // One metadata set (and builder) per disjoint block set, each block table shuffled.
  std::vector<CommonAttentionMetadata> commons(static_cast<size_t>(sets));
  std::vector<std::unique_ptr<MetadataBuilder>> builders;
  std::vector<const AttentionMetadata*> plans;
  for (int set = 0; set < sets; ++set) {
    auto& c = commons[static_cast<size_t>(set)];
    c.num_reqs = s.batch;
    c.num_actual_tokens = T;
    c.block_size = bs;
    c.max_blocks_per_req = blocks_per_seq;
    c.max_query_len = q_len;
    c.max_seq_len = s.context;
    std::vector<int32_t> ids(static_cast<size_t>(s.batch) * blocks_per_seq);
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<int32_t>(set * ids.size() + i);
    }
    std::shuffle(ids.begin(), ids.end(), rng);
    c.block_table = ids;
    c.query_start_loc.push_back(0);
    for (int b = 0; b < s.batch; ++b) {
      c.query_start_loc.push_back(c.query_start_loc.back() + q_len);
      c.seq_lens.push_back(s.context);
      for (int j = 0; j < q_len; ++j) {
        const int pos = s.context - q_len + j;
        c.slot_mapping.push_back(
            static_cast<int64_t>(ids[static_cast<size_t>(b) * blocks_per_seq + pos / bs]) * bs +
            pos % bs);
      }
    }
    builders.push_back(backend->make_builder(spec, layer));
    plans.push_back(&builders.back()->build(c));
  }

  const Device dev{DeviceType::kCuda, 0};
  KvCacheTensors cache;
  cache.layout = KvLayout::kNHD;
  cache.block_size = bs;
  cache.key = TensorView::contiguous(k_cache.data(), kv_type, {total_blocks, bs, KVH, D}, dev);
  cache.value = TensorView::contiguous(v_cache.data(), kv_type, {total_blocks, bs, KVH, D}, dev);
  const TensorView qv = TensorView::contiguous(q.data(), ScalarType::kBFloat16, {T, H, D}, dev);
  const TensorView ov = TensorView::contiguous(out.data(), ScalarType::kBFloat16, {T, H, D}, dev);
  const TensorView kv = TensorView::contiguous(key.data(), ScalarType::kBFloat16, {T, KVH, D}, dev);
  const TensorView vv =
      TensorView::contiguous(value.data(), ScalarType::kBFloat16, {T, KVH, D}, dev);

  const double flops_full = 4.0 * s.batch * H * static_cast<double>(q_len) * s.context * D;
  Result r;
  r.shape = s;
  r.backend = backend_name;
  r.ms = median_ms(
      [&](int i) { impl->forward(qv, kv, vv, cache, *plans[static_cast<size_t>(i % sets)], ov); });
  check(cudaDeviceSynchronize(), "forward");
  r.graph_ms = graph_replay_ms(sets, [&](int set, const ExecutionContext& ctx) {
    impl->forward(qv, kv, vv, cache, *plans[static_cast<size_t>(set)], ov, ctx);
  });
  if (trace && backend_name == "CUDA_FLASH") {
#if defined(ATTNKIT_FLASH_TRACE)
    std::printf("%s (%s): %.4f ms per step\n", s.name().c_str(), backend_name.c_str(), r.ms);
    print_trace([&](int i) {
      impl->forward(qv, kv, vv, cache, *plans[static_cast<size_t>(i % sets)], ov);
    });
#endif
  }
  const double bytes = static_cast<double>(set_bytes) + 2.0 * T * H * D * 2;
  r.gbs = bytes / (r.ms * 1e-3) / 1e9;
  r.pct_copy = 100.0 * r.gbs / copy_gbs;
  r.tflops = (decode ? flops_full : flops_full / 2) / (r.ms * 1e-3) / 1e12;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false, trace = false;
  std::string only;
  std::vector<Shape> custom;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--trace") == 0) trace = true;
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
      Shape sh;
      char kind[16] = {0}, extra[16] = {0};
      const int n = std::sscanf(argv[++i], "%15[a-z],%d,%d,%d,%d,%d,%15s", kind, &sh.batch,
                                &sh.context, &sh.heads, &sh.kv_heads, &sh.head_size, extra);
      sh.kind = kind;
      sh.sinks = n == 7 && std::strcmp(extra, "sinks") == 0;
      sh.fp8 = n == 7 && std::strcmp(extra, "fp8") == 0;
      if (n < 6 || (n == 7 && !sh.sinks && !sh.fp8) ||
          (sh.kind != "decode" && sh.kind != "prefill") || sh.batch <= 0 || sh.context <= 0 ||
          sh.kv_heads <= 0 || sh.heads % sh.kv_heads != 0) {
        std::fprintf(stderr,
                     "--shape %s: expected KIND,B,S,H,KVH,D[,sinks|,fp8] with KIND decode or "
                     "prefill and H a multiple of KVH\n",
                     argv[i]);
        return 2;
      }
      custom.push_back(sh);
    }
  }
#if !defined(ATTNKIT_FLASH_TRACE)
  if (trace) {
    std::fprintf(stderr, "--trace needs a build with ATTNKIT_FLASH_TRACE defined\n");
    return 2;
  }
#endif
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA device: nothing to benchmark\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::mt19937 rng(12345);
  const double copy_gbs = copy_bandwidth_gbs();
  std::printf("device: %s, %d SMs; device-to-device copy: %.0f GB/s (read + write)\n", prop.name,
              prop.multiProcessorCount, copy_gbs);

  std::vector<Shape> decode = {{"decode", 1, 16384, 32, 8, 128},
                               {"decode", 16, 4096, 32, 8, 128},
                               {"decode", 64, 2048, 32, 8, 128},
                               {"decode", 128, 1024, 32, 8, 128},
                               {"decode", 64, 4096, 4, 1, 256},
                               {"decode", 64, 4096, 64, 8, 64, true},
                               {"decode", 64, 2048, 32, 8, 128, false, true}};
  std::vector<Shape> prefill = {
      {"prefill", 8, 2048, 16, 16, 128},  {"prefill", 2, 8192, 16, 16, 128},
      {"prefill", 1, 16384, 16, 16, 128}, {"prefill", 2, 8192, 32, 32, 64},
      {"prefill", 2, 8192, 8, 8, 256},    {"prefill", 4, 4096, 32, 8, 128}};
  if (quick) {
    decode.resize(2);
    prefill.resize(2);
  }
  auto selected = [&](const Shape& s) {
    return only.empty() || s.name().find(only) != std::string::npos;
  };
  std::vector<Result> results;
  if (!custom.empty()) {
    for (const Shape& s : custom)
      results.push_back(run_shape(s.fp8 ? "CUDA_PAGED" : "CUDA_FLASH", s, copy_gbs, rng, trace));
    decode.clear();
    prefill.clear();
  }
  for (const char* backend : {"CUDA_FLASH", "CUDA_PAGED"}) {
    for (const Shape& s : decode) {
      const bool declared = !s.fp8 || std::strcmp(backend, "CUDA_PAGED") == 0;
      if (declared && selected(s)) results.push_back(run_shape(backend, s, copy_gbs, rng, trace));
    }
  }
  for (const Shape& s : prefill) {
    if (selected(s)) results.push_back(run_shape("CUDA_FLASH", s, copy_gbs, rng, trace));
  }
  // CUDA_PAGED prefill runs on CUDA cores: one shape, to place it.
  if (!prefill.empty() && selected(prefill[0])) {
    results.push_back(run_shape("CUDA_PAGED", prefill[0], copy_gbs, rng, trace));
  }

  std::printf("\n%-34s %-11s %10s %9s %7s %9s %10s\n", "shape", "backend", "ms", "GB/s", "%copy",
              "TFLOP/s", "graph ms");
  for (const Result& r : results) {
    std::printf("%-34s %-11s %10.4f %9.0f %6.1f%% %9.1f %10.4f\n", r.shape.name().c_str(),
                r.backend.c_str(), r.ms, r.gbs, r.pct_copy, r.tflops, r.graph_ms);
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\"device\": \"%s\", \"copy_gbs\": %.1f, \"results\": [\n", prop.name,
                 copy_gbs);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(f,
                   "  {\"kind\": \"%s\", \"batch\": %d, \"context\": %d, \"heads\": %d, "
                   "\"kv_heads\": %d, \"head_size\": %d, \"sinks\": %s, \"kv_cache\": \"%s\", "
                   "\"backend\": \"%s\", "
                   "\"ms\": %.5f, \"graph_ms\": %.5f, \"gbs\": %.1f, \"pct_copy\": %.2f, "
                   "\"tflops\": %.2f}%s\n",
                   r.shape.kind.c_str(), r.shape.batch, r.shape.context, r.shape.heads,
                   r.shape.kv_heads, r.shape.head_size, r.shape.sinks ? "true" : "false",
                   r.shape.fp8 ? "fp8_e4m3" : "auto", r.backend.c_str(), r.ms, r.graph_ms, r.gbs,
                   r.pct_copy, r.tflops, i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}

#else

#include <cstdio>

int main() {
  std::printf("built without CUDA: nothing to benchmark\n");
  return 0;
}

#endif
