// CUDA attention benchmark: CUDA_FLASH and CUDA_PAGED through the library path (builder +
// forward, cache update included) on the decode and prefill shapes of issue 8, against the
// read ceiling (a streaming read-only kernel) and the device-to-device copy bandwidth, both
// measured in the same run.
//
//   cuda_attention_bench [--json FILE] [--quick] [--only TEXT] [--trace]
//                        [--shape KIND,B,S,H,KVH,D[,sinks|,fp8|,fp8_e5m2]]... [--backend NAME]...
//
// --trace (a build with ATTNKIT_FLASH_TRACE defined, see attnkit/kernels/flash_trace.h)
// also prints, per CUDA_FLASH shape, when the CTAs of one step pass each point of their
// life (earliest, median and latest CTA, in microseconds from the step's first CTA) and the
// host's time to issue one forward.
//
// --only runs just the shapes whose name contains TEXT (e.g. "decode b64 s2048"), for
// profiling one shape under ncu. --shape (repeatable) replaces the shapes by the
// given ones (KIND decode or prefill; batch, context, heads, KV heads, head size), run on
// CUDA_FLASH unless --backend says otherwise: e.g. a context sweep to separate fixed from
// per-byte costs. --backend (repeatable) limits the backends (default: CUDA_FLASH and, on
// decode and the first prefill shape, CUDA_PAGED).
//
// Decode reports GB/s (K/V bytes read once + q/out) and % of the read ceiling; prefill
// reports TFLOP/s with 4*b*h*s*s*d FLOPs, halved for causal. Inputs are random bf16; each
// shape rotates over several disjoint sets of KV blocks (>= ~2 GB in all) so that no call
// finds its K/V in the 60 MB L2. Two times per shape: eager (the median of 7 batches of
// back-to-back forwards, ~25 ms each) and graph (one CUDA graph of N forwards cycling
// over the sets, N such that a replay lasts >= ~3 ms: the median of 7 replays / N), the
// same graph method bench/cuda_peers.py times its peers with. Shapes marked fp8kv
// (e4m3) or fp8e5m2kv keep the cache in fp8 (random values in [-1, 1], scales 1).
//
// Decode also reports %stepread: the graph-replayed time of one read of the step's own K/V
// bytes by the read ceiling's kernel (rotating over as many disjoint buffers as the step's
// KV sets) over the backend's graph time. It is how close the step comes to one bare read
// of its bytes, which pays the launch, ramp-up and tail that any one-launch kernel pays
// (the read ceiling, over 2 GiB, hides them).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/build_config.h"
#include "attnkit/core/numeric.h"
#include "attnkit/kernels/flash_trace.h"
#include "attnkit/registry/registry.h"

#if ATTNKIT_HAS_CUDA
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "attnkit/bench/machine_ceilings.h"
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
  KvCacheDType kv = KvCacheDType::kAuto;  // kAuto: the compute dtype (bf16)
  bool fp8() const { return is_fp8(kv); }
  std::string name() const {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s b%d s%d h%d/%d d%d%s%s", kind.c_str(), batch, context, heads,
                  kv_heads, head_size, sinks ? " sinks" : "",
                  kv == KvCacheDType::kFp8E4M3   ? " fp8kv"
                  : kv == KvCacheDType::kFp8E5M2 ? " fp8e5m2kv"
                                                 : "");
    return buf;
  }
};

#if defined(ATTNKIT_FLASH_TRACE)
// Per CTA, the time between consecutive marks it has (median and mean over the CTAs, us),
// and, where the kernel records its SM (kTraceSmId), the gap on each SM between a CTA's
// last mark and the start of the next CTA there: what a CTA's turnover costs the SM.
void print_trace_phases(const std::vector<uint64_t>& marks, uint64_t first) {
  using namespace attnkit::cuda;
  const auto row_of = [&](int cta) {
    return marks.data() + static_cast<size_t>(cta) * kFlashTracePoints;
  };
  const auto summary = [](const char* name, std::vector<double> us) {
    if (us.empty()) return;
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double u : us) sum += u;
    std::printf("  %-26s %5zu  median %7.2f  mean %7.2f  p90 %7.2f us\n", name, us.size(),
                us[us.size() / 2], sum / static_cast<double>(us.size()), us[us.size() * 9 / 10]);
  };
  // Consecutive points a CTA recorded (a point the kernel does not mark is skipped), then
  // the producer's end against the consumers' (signed: negative when it ended first).
  static const int order[] = {kTraceStart,     kTraceWaited,       kTraceQLoaded,
                              kTraceFirstTile, kTraceFirstPacked,  kTraceLastPacked,
                              kTraceLoopDone,  kTraceResultWritten};
  static const char* point_name[] = {"start",        "waited",      "q loaded",  "first tile",
                                     "first packed", "last packed", "loop done", "written"};
  for (size_t i = 0; i + 1 < std::size(order); ++i) {
    for (size_t j = i + 1; j < std::size(order); ++j) {
      std::vector<double> us;
      for (int cta = 0; cta < kFlashTraceCtas; ++cta) {
        const uint64_t* row = row_of(cta);
        const uint64_t a = row[order[i]], b = row[order[j]];
        if (row[kTraceStart] == 0 || a == 0 || b == 0 || b < a) continue;
        us.push_back(static_cast<double>(b - a) * 1e-3);
      }
      if (us.empty()) continue;
      const std::string name = std::string(point_name[i]) + " -> " + point_name[j];
      summary(name.c_str(), std::move(us));
      break;
    }
  }
  // The producer's points against the consumers' loop end (signed: negative when before).
  static const int producer_points[] = {kTraceLoadsIssued, kTraceOwnTilesIn, kTraceWriteIssued,
                                        kTraceProducerDone};
  static const char* producer_names[] = {"loads issued - loop done", "own tiles in - loop done",
                                         "write issued - loop done", "producer done - loop done"};
  for (size_t i = 0; i < std::size(producer_points); ++i) {
    std::vector<double> us;
    for (int cta = 0; cta < kFlashTraceCtas; ++cta) {
      const uint64_t* row = row_of(cta);
      const uint64_t at = row[producer_points[i]];
      if (at == 0 || row[kTraceLoopDone] == 0 || at < row[kTraceStart]) continue;
      us.push_back((static_cast<double>(at) - static_cast<double>(row[kTraceLoopDone])) * 1e-3);
    }
    summary(producer_names[i], std::move(us));
  }
  // CTAs per SM in start order; the gap from one's last mark to the next one's start.
  std::map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> per_sm;
  for (int cta = 0; cta < kFlashTraceCtas; ++cta) {
    const uint64_t* row = row_of(cta);
    if (row[kTraceSmId] == 0 || row[kTraceStart] == 0) continue;
    uint64_t last = row[kTraceStart];
    for (int point = 0; point < kFlashTracePoints; ++point) {
      if (point != kTraceSmId) last = std::max(last, row[point]);
    }
    per_sm[row[kTraceSmId]].emplace_back(row[kTraceStart], last);
  }
  std::vector<double> gaps, busy_end;
  for (auto& [sm, ctas] : per_sm) {
    std::sort(ctas.begin(), ctas.end());
    for (size_t i = 0; i + 1 < ctas.size(); ++i) {
      const double gap =
          (static_cast<double>(ctas[i + 1].first) - static_cast<double>(ctas[i].second)) * 1e-3;
      gaps.push_back(gap);
    }
    busy_end.push_back(static_cast<double>(ctas.back().second - first) * 1e-3);
  }
  if (!per_sm.empty()) {
    size_t ctas = 0;
    for (const auto& entry : per_sm) ctas += entry.second.size();
    std::printf("  %zu SMs, %.1f CTAs each on average\n", per_sm.size(),
                static_cast<double>(ctas) / static_cast<double>(per_sm.size()));
    summary("SM gap: last mark -> next", std::move(gaps));
    summary("SM's last mark", std::move(busy_end));
  }
}

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
  static const char* names[kFlashTracePoints] = {
      "start",        "waited",       "first tile",   "loop done",     "written",
      "counted",      "merge issued", "merge loaded", "merged (last)", "q loaded",
      "sm id",        "first packed", "last packed",  "producer done", "loads issued",
      "own tiles in", "write issued"};
  for (int point = 0; point < kFlashTracePoints; ++point) {
    if (point == kTraceSmId) continue;  // not a time
    std::vector<double> us;
    for (int cta = 0; cta < kFlashTraceCtas; ++cta) {
      const uint64_t* row = marks.data() + static_cast<size_t>(cta) * kFlashTracePoints;
      const uint64_t t = row[point];
      if (t == 0 || row[kTraceStart] == 0 || t < first) continue;
      if (point >= kTraceMergeIssued && point <= kTraceMerged && t < row[kTraceCounted]) {
        continue;
      }
      us.push_back(static_cast<double>(t - first) * 1e-3);
    }
    if (us.empty()) continue;
    std::sort(us.begin(), us.end());
    std::printf("  %-14s %5zu CTAs  earliest %7.2f  median %7.2f  latest %7.2f us\n", names[point],
                us.size(), us.front(), us[us.size() / 2], us.back());
  }
  print_trace_phases(marks, first);
}
#endif

struct Result {
  Shape shape;
  std::string backend;
  double ms = 0, gbs = 0, pct_read = 0, pct_copy = 0, tflops = 0;
  double graph_ms = 0;  // the same forwards replayed from one captured CUDA graph
  double graph_pct_read = 0;
  // Decode: one bare read of the step's K/V bytes (measure_gpu_read_step_ms), and it as a
  // percentage of graph_ms.
  double step_read_ms = 0, graph_pct_step_read = 0;
};

// One CUDA graph (the execution contract, core/execution.h) holding N forwards
// `forward(i % sets, ctx)`, N = graph_replay_calls(sets, eager time per call) (a replay of
// >= ~3 ms); the median of 7 replays divided by N. bench/cuda_peers.py times
// its peers the same way.
template <typename F>
double graph_replay_ms(int sets, double eager_ms, F&& forward) {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream), "stream");  // blocking: the timing events order with it
  const int n = graph_replay_calls(sets, eager_ms);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  for (int i = 0; i < n; ++i) forward(i % sets, ExecutionContext{stream});
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  check(cudaGraphDestroy(graph), "graph");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(cudaGraphLaunch(exec, stream), "replay");  // warm-up
  std::vector<double> times;
  for (int rep = 0; rep < 7; ++rep) {
    check(cudaEventRecord(a, stream), "record");
    check(cudaGraphLaunch(exec, stream), "replay");
    check(cudaEventRecord(b, stream), "record");
    check(cudaEventSynchronize(b), "replays");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    times.push_back(ms / n);
  }
  check(cudaEventDestroy(a), "event");
  check(cudaEventDestroy(b), "event");
  check(cudaGraphExecDestroy(exec), "graph exec");
  check(cudaStreamDestroy(stream), "stream");
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Ceilings {
  double read_gbs = 0, copy_gbs = 0;
};

Result run_shape(const std::string& backend_name, const Shape& s, const Ceilings& ceilings,
                 std::mt19937& rng, bool trace, int bs) {
  const bool decode = s.kind == "decode";
  const int D = s.head_size, H = s.heads, KVH = s.kv_heads;
  const int q_len = decode ? 1 : s.context;
  const int T = s.batch * q_len;
  const int blocks_per_seq = (s.context + bs - 1) / bs;
  const size_t kv_bytes = s.fp8() ? 1 : 2;  // per cache element
  const ScalarType kv_type = scalar_type_of(s.kv, DType::kBFloat16);
  const size_t block_bytes = static_cast<size_t>(bs) * KVH * D * kv_bytes;
  const size_t set_bytes = static_cast<size_t>(s.batch) * blocks_per_seq * block_bytes * 2;
  const int sets = static_cast<int>(std::clamp<size_t>((size_t{2} << 30) / set_bytes + 1, 1, 8));
  const int total_blocks = sets * s.batch * blocks_per_seq;

  DeviceBuffer k_cache = device_buffer(static_cast<size_t>(total_blocks) * block_bytes);
  DeviceBuffer v_cache = device_buffer(static_cast<size_t>(total_blocks) * block_bytes);
  for (void* cache_ptr : {k_cache.data(), v_cache.data()}) {
    const size_t cache_bytes = static_cast<size_t>(total_blocks) * block_bytes;
    if (s.kv == KvCacheDType::kFp8E4M3) {
      fill_random(cache_ptr, cache_bytes, rng, float_to_fp8_e4m3);
    } else if (s.kv == KvCacheDType::kFp8E5M2) {
      fill_random(cache_ptr, cache_bytes, rng, float_to_fp8_e5m2);
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
  layer.kv_cache_dtype = s.kv;
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
  r.graph_ms = graph_replay_ms(sets, r.ms, [&](int set, const ExecutionContext& ctx) {
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
  r.pct_read = 100.0 * r.gbs / ceilings.read_gbs;
  r.pct_copy = 100.0 * r.gbs / ceilings.copy_gbs;
  r.graph_pct_read = 100.0 * bytes / (r.graph_ms * 1e-3) / 1e9 / ceilings.read_gbs;
  r.tflops = (decode ? flops_full : flops_full / 2) / (r.ms * 1e-3) / 1e12;
  if (decode) {
    r.step_read_ms = measure_gpu_read_step_ms(set_bytes, sets);
    r.graph_pct_step_read = 100.0 * r.step_read_ms / r.graph_ms;
  }
  return r;
}

// "KIND,B,S,H,KVH,D[,sinks|,fp8|,fp8_e5m2]" as a Shape, or a message naming what is wrong.
std::string parse_shape(const std::string& text, Shape& sh) {
  char kind[16] = {0}, extra[16] = {0};
  const int n = std::sscanf(text.c_str(), "%15[a-z],%d,%d,%d,%d,%d,%15s", kind, &sh.batch,
                            &sh.context, &sh.heads, &sh.kv_heads, &sh.head_size, extra);
  sh.kind = kind;
  const std::string ex = n == 7 ? extra : "";
  sh.sinks = ex == "sinks";
  sh.kv = ex == "fp8"        ? KvCacheDType::kFp8E4M3
          : ex == "fp8_e5m2" ? KvCacheDType::kFp8E5M2
                             : KvCacheDType::kAuto;
  if (n < 6 || (n == 7 && !sh.sinks && !sh.fp8()) ||
      (sh.kind != "decode" && sh.kind != "prefill") || sh.batch <= 0 || sh.context <= 0 ||
      sh.kv_heads <= 0 || sh.heads % sh.kv_heads != 0) {
    return "--shape " + text +
           ": expected KIND,B,S,H,KVH,D[,sinks|,fp8|,fp8_e5m2] with KIND decode or prefill, "
           "positive sizes and H a multiple of KVH";
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CUDA_FLASH and CUDA_PAGED on the decode and prefill benchmark shapes"};
  std::string json_path, only;
  bool quick = false, trace = false;
  int block_size = 16;
  std::vector<std::string> shape_texts, backends;
  app.add_option("--json", json_path, "write the results here");
  app.add_flag("--quick", quick, "the first two decode and prefill shapes only");
  app.add_option("--only", only, "only the shapes whose name contains this text");
  app.add_flag("--trace", trace, "CTA timelines (a build with ATTNKIT_FLASH_TRACE)");
  app.add_option("--block-size", block_size, "tokens per KV-cache block (default 16)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--shape", shape_texts, "KIND,B,S,H,KVH,D[,sinks|,fp8|,fp8_e5m2], repeatable");
  app.add_option("--backend", backends, "CUDA_FLASH or CUDA_PAGED, repeatable")
      ->check(CLI::IsMember({"CUDA_FLASH", "CUDA_PAGED"}));
  CLI11_PARSE(app, argc, argv);
  std::vector<Shape> custom;
  for (const std::string& text : shape_texts) {
    Shape sh;
    const std::string error = parse_shape(text, sh);
    if (!error.empty()) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 2;
    }
    custom.push_back(sh);
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
  Ceilings ceilings;
  ceilings.read_gbs = measure_gpu_read_bandwidth();
  ceilings.copy_gbs = copy_bandwidth_gbs();
  std::printf(
      "device: %s, %d SMs; read ceiling %.0f GB/s (streaming read-only kernel); "
      "device-to-device copy %.0f GB/s (read + write); KV blocks of %d tokens\n",
      prop.name, prop.multiProcessorCount, ceilings.read_gbs, ceilings.copy_gbs, block_size);

  std::vector<Shape> decode = {{"decode", 1, 16384, 32, 8, 128},
                               {"decode", 16, 4096, 32, 8, 128},
                               {"decode", 64, 2048, 32, 8, 128},
                               {"decode", 128, 1024, 32, 8, 128},
                               {"decode", 64, 4096, 4, 1, 256},
                               {"decode", 64, 4096, 64, 8, 64, true},
                               {"decode", 64, 2048, 32, 8, 128, false, KvCacheDType::kFp8E4M3},
                               {"decode", 64, 2048, 32, 8, 128, false, KvCacheDType::kFp8E5M2},
                               {"decode", 16, 4096, 32, 8, 128, false, KvCacheDType::kFp8E4M3}};
  std::vector<Shape> prefill = {{"prefill", 8, 2048, 16, 16, 128},
                                {"prefill", 2, 8192, 16, 16, 128},
                                {"prefill", 1, 16384, 16, 16, 128},
                                {"prefill", 2, 8192, 32, 32, 64},
                                {"prefill", 2, 8192, 8, 8, 256},
                                {"prefill", 4, 4096, 32, 8, 128},
                                {"prefill", 2, 8192, 16, 16, 128, false, KvCacheDType::kFp8E4M3}};
  if (quick) {
    decode.resize(2);
    prefill.resize(2);
  }
  auto selected = [&](const Shape& s) {
    return only.empty() || s.name().find(only) != std::string::npos;
  };
  auto wanted = [&](const char* backend) {
    return backends.empty() ||
           std::find(backends.begin(), backends.end(), backend) != backends.end();
  };
  std::vector<Result> results;
  if (!custom.empty()) {
    for (const Shape& s : custom) {
      for (const char* backend : {"CUDA_FLASH", "CUDA_PAGED"}) {
        const bool chosen =
            backends.empty() ? std::strcmp(backend, "CUDA_FLASH") == 0 : wanted(backend);
        if (chosen) results.push_back(run_shape(backend, s, ceilings, rng, trace, block_size));
      }
    }
    decode.clear();
    prefill.clear();
  }
  for (const char* backend : {"CUDA_FLASH", "CUDA_PAGED"}) {
    for (const Shape& s : decode) {
      if (wanted(backend) && selected(s))
        results.push_back(run_shape(backend, s, ceilings, rng, trace, block_size));
    }
  }
  for (const Shape& s : prefill) {
    if (wanted("CUDA_FLASH") && selected(s)) {
      results.push_back(run_shape("CUDA_FLASH", s, ceilings, rng, trace, block_size));
    }
  }
  // CUDA_PAGED prefill runs on CUDA cores: one shape, to place it.
  if (!prefill.empty() && selected(prefill[0]) && wanted("CUDA_PAGED")) {
    results.push_back(run_shape("CUDA_PAGED", prefill[0], ceilings, rng, trace, block_size));
  }

  std::printf("\n%-36s %-11s %10s %9s %7s %9s %10s %7s %9s\n", "shape", "backend", "eager ms",
              "GB/s", "%read", "TFLOP/s", "graph ms", "%read", "%stepread");
  for (const Result& r : results) {
    char step_read[16] = "-";
    if (r.step_read_ms > 0)
      std::snprintf(step_read, sizeof step_read, "%.1f%%", r.graph_pct_step_read);
    std::printf("%-36s %-11s %10.4f %9.0f %6.1f%% %9.1f %10.4f %6.1f%% %9s\n",
                r.shape.name().c_str(), r.backend.c_str(), r.ms, r.gbs, r.pct_read, r.tflops,
                r.graph_ms, r.graph_pct_read, step_read);
  }
  if (!json_path.empty()) {
    nlohmann::ordered_json doc;
    doc["device"] = prop.name;
    doc["read_gbs"] = ceilings.read_gbs;
    doc["copy_gbs"] = ceilings.copy_gbs;
    doc["block_size"] = block_size;
    doc["results"] = nlohmann::ordered_json::array();
    for (const Result& r : results) {
      nlohmann::ordered_json row = {{"kind", r.shape.kind},
                                    {"batch", r.shape.batch},
                                    {"context", r.shape.context},
                                    {"heads", r.shape.heads},
                                    {"kv_heads", r.shape.kv_heads},
                                    {"head_size", r.shape.head_size},
                                    {"sinks", r.shape.sinks},
                                    {"kv_cache", std::string(to_string(r.shape.kv))},
                                    {"backend", r.backend},
                                    {"ms", r.ms},
                                    {"graph_ms", r.graph_ms},
                                    {"gbs", r.gbs},
                                    {"pct_read", r.pct_read},
                                    {"pct_copy", r.pct_copy},
                                    {"graph_pct_read", r.graph_pct_read},
                                    {"tflops", r.tflops}};
      if (r.step_read_ms > 0) {
        row["step_read_ms"] = r.step_read_ms;
        row["graph_pct_step_read"] = r.graph_pct_step_read;
      }
      doc["results"].push_back(row);
    }
    std::ofstream f(json_path);
    f << doc.dump(1) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
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
