// attnkit bench: times one attention shape on one backend (fresh random inputs, warm-up,
// median of repeats) and reports it against this machine's ceilings measured in the same
// run. The shape and timing code is shared with bench/cpu_attention_bench.cpp
// (src/bench_support/).

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "attnkit/bench/attention_bench.h"
#include "attnkit/bench/machine_ceilings.h"
#include "attnkit/core/error.h"
#include "attnkit/core/json_schema.h"
#include "attnkit/kernels/cpu_isa.h"
#include "attnkit/model/model_limits.h"
#include "attnkit/registry/registry.h"
#include "attnkit/runtime/request.h"
#include "commands.h"
#include "common_options.h"

namespace attnkit::cli {
namespace {

struct BenchArgs {
  std::string backend = "CPU_FLASH";
  std::string heads = "32/8";
  int head_size = 128;
  int batch = 1;
  int context = 4096;
  int query_len = 1;
  bool causal = false;
  bool sinks = false;
  std::string kv_cache_dtype = "auto";
  std::string dtype = "bf16";
  int block_size = 16;
  int threads = 0;
  int repeats = 9;
  int warmup = 2;
  int read_buffer_mb = 512;
  bool cache_resident = false;
  bool json = false;
};

// "32/8" -> (32, 8); "8" -> (8, 8). Every character must belong to the numbers.
std::pair<int, int> parse_heads(const std::string& text) {
  const auto number = [](std::string_view part, int& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return !part.empty() && ec == std::errc() && end == part.data() + part.size();
  };
  const size_t slash = text.find('/');
  const std::string_view all(text);
  int q = 0;
  int kv = 0;
  const bool parsed = slash == std::string::npos
                          ? number(all, q) && number(all, kv)
                          : number(all.substr(0, slash), q) && number(all.substr(slash + 1), kv);
  if (parsed && q > 0 && kv > 0 && q <= kMaxModelHeads && q % kv == 0) return {q, kv};
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("--heads '{}' must be Q/KV (or Q) with 1 <= KV <= Q <= {} and Q a "
                          "multiple of KV, e.g. 32/8",
                          text, kMaxModelHeads));
}

// Physical memory of this machine, in bytes (0 when unknown).
uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

// Refuses a shape whose buffers cannot fit this machine before allocating any of them.
void check_bench_memory(const bench::BenchShape& shape, const BenchArgs& a) {
  const bench::BenchWork work = bench::bench_work(shape);
  const double rows = static_cast<double>(a.batch) * a.query_len * shape.num_heads;
  const double qo_bytes = 2.0 * rows * shape.head_size * 4;
  const double read_buffer = static_cast<double>(a.read_buffer_mb) * (1 << 20);
  const double needed = work.kv_bytes + qo_bytes + read_buffer;
  const uint64_t memory = physical_memory_bytes();
  if (memory > 0 && needed > static_cast<double>(memory)) {
    throw Error(ErrorCode::kOutOfMemory,
                fmt::format("the shape needs {:.3g} bytes (KV cache {:.3g} from --batch {} x "
                            "--context {} x --heads {} x --head-size {}; query and output "
                            "{:.3g}; --read-buffer-mb {}) but this machine has {} bytes of "
                            "memory",
                            needed, work.kv_bytes, a.batch, a.context, a.heads, a.head_size,
                            qo_bytes, a.read_buffer_mb, memory));
  }
}

// A CUDA backend on CUDA device 0: the time per forward (runs of forwards back to back, one
// wait each) against the device's read bandwidth, measured in the same run by a streaming
// read kernel (decode reads its KV cache once: that is its ceiling).
void run_gpu_bench(const AttentionBackend& backend, const bench::BenchShape& shape,
                   const bench::TimingOptions& options, bool json) {
  const bench::Timing timing = bench::time_backend(backend, shape, options);
  const double read_ceiling = bench::measure_gpu_read_bandwidth();
  const bench::BenchWork work = bench::bench_work(shape);
  const double seconds = timing.median_us * 1e-6;
  const double kv_gb_per_s = work.kv_bytes / seconds / 1e9;
  const double tflop_per_s = work.flops / seconds / 1e12;
  if (json) {
    nlohmann::json j;
    j["backend"] = std::string(backend.name());
    j["device"] = timing.device;
    j["shape"] = shape.describe();
    j["median_us"] = timing.median_us;
    j["min_us"] = timing.min_us;
    j["repeats"] = timing.repeats;
    j["kv_replicas"] = timing.layers;
    j["kv_bytes"] = work.kv_bytes;
    j["flops"] = work.flops;
    j["kv_gb_per_s"] = kv_gb_per_s;
    j["tflop_per_s"] = tflop_per_s;
    j["read_gb_per_s_ceiling"] = read_ceiling;
    j["kv_read_ratio"] = kv_gb_per_s / read_ceiling;
    print_json(j);
    return;
  }
  std::printf("backend      %s on %s\n", std::string(backend.name()).c_str(),
              timing.device.c_str());
  std::printf("shape        %s%s\n", shape.describe().c_str(),
              shape.causal ? ", causal" : ", non-causal");
  std::printf("time         %.1f us median per forward (min %.1f, %d repeats, %d KV replicas)\n",
              timing.median_us, timing.min_us, timing.repeats, timing.layers);
  std::printf("KV read      %.1f GB/s = %.0f%% of the measured GPU read bandwidth %.0f GB/s\n",
              kv_gb_per_s, 100 * kv_gb_per_s / read_ceiling, read_ceiling);
  std::printf("compute      %.2f TFLOP/s\n", tflop_per_s);
}

void run_bench(const BenchArgs& a) {
  const auto [q_heads, kv_heads] = parse_heads(a.heads);
  if (a.query_len > a.context) {
    throw Error(ErrorCode::kInvalidArgument, "--query-len " + std::to_string(a.query_len) +
                                                 " exceeds --context " + std::to_string(a.context));
  }
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const int threads = omp_get_max_threads();

  bench::BenchShape shape = bench::BenchShape::uniform("cli", q_heads, kv_heads, a.head_size,
                                                       a.batch, a.context, a.query_len);
  // One query per request is decode (causality is moot); longer queries are causal
  // prefill with --causal, else non-causal (cross) attention over the cache.
  shape.causal = a.causal || a.query_len == 1;
  shape.sinks = a.sinks;
  shape.dtype = parse<DType>(a.dtype);
  shape.kv_cache_dtype = parse<KvCacheDType>(a.kv_cache_dtype);
  shape.block_size = a.block_size;
  check_bench_memory(shape, a);

  const auto backend = global_registry().get(a.backend);
  bench::TimingOptions options;
  options.repeats = a.repeats;
  options.warmup = a.warmup;
  options.cache_resident = a.cache_resident;
  if (backend->capabilities().platform == PlatformKind::kCuda) {
    run_gpu_bench(*backend, shape, options, a.json);
    return;
  }
  const bench::MachineCeilings ceilings =
      bench::measure_machine_ceilings(threads, static_cast<size_t>(a.read_buffer_mb) << 20);
  const bench::Timing timing = bench::time_backend(*backend, shape, options);
  const bench::BenchReport r = bench::make_report(shape, timing, ceilings);
  const bench::BenchWork work = bench::bench_work(shape);

  if (a.json) {
    nlohmann::json j;
    j["backend"] = std::string(backend->name());
    j["schema_version"] = kJsonSchemaVersion;
    j["shape"] = shape.describe();
    // The shape as data ("shape" is the same as a label).
    j["config"] = {{"num_heads", shape.num_heads},
                   {"num_kv_heads", shape.num_kv_heads},
                   {"head_size", shape.head_size},
                   {"batch", a.batch},
                   {"context", a.context},
                   {"query_len", a.query_len},
                   {"causal", shape.causal},
                   {"sinks", shape.sinks},
                   {"dtype", std::string(to_string(shape.dtype))},
                   {"kv_cache_dtype", std::string(to_string(shape.kv_cache_dtype))},
                   {"block_size", shape.block_size}};
    j["threads"] = threads;
    j["cpu_isa"] = std::string(cpu::to_string(cpu::active_cpu_isa()));
    j["median_us"] = r.median_us;
    j["min_us"] = r.min_us;
    j["median_cpu_us"] = timing.median_cpu_us;
    j["repeats"] = timing.repeats;
    j["kv_replicas"] = timing.layers;
    j["kv_bytes"] = work.kv_bytes;
    j["flops"] = work.flops;
    j["kv_gb_per_s"] = r.kv_gb_per_s;
    j["gflop_per_s"] = r.gflop_per_s;
    j["read_gb_per_s_ceiling"] = ceilings.read_gb_per_s;
    j["read_huge_pages"] = ceilings.read_huge_pages;
    j["flop_ceiling_gflop_per_s"] = r.flop_ceiling_gflop_per_s;
    j["fma_gflop_per_s_ceiling"] = ceilings.fma_gflop_per_s;
    j["fma_isa"] = ceilings.fma_isa;
    j["bf16_dot_gflop_per_s_ceiling"] = ceilings.bf16_dot_gflop_per_s;
    j["amx_bf16_gflop_per_s_ceiling"] = ceilings.amx_bf16_gflop_per_s;
    j["kv_read_ratio"] = r.read_ratio;
    j["flop_ratio"] = r.flop_ratio;
    print_json(j);
    return;
  }
  std::printf("backend      %s (%d threads, cpu isa %s)\n", std::string(backend->name()).c_str(),
              threads, std::string(cpu::to_string(cpu::active_cpu_isa())).c_str());
  std::printf("shape        %s%s\n", shape.describe().c_str(),
              shape.causal ? ", causal" : ", non-causal");
  std::printf(
      "time         %.1f us median (min %.1f, %d repeats; %.1f us of CPU time; %d KV replicas)\n",
      r.median_us, r.min_us, timing.repeats, timing.median_cpu_us, timing.layers);
  std::printf("KV read      %.2f GB/s = %.0f%% of measured read bandwidth %.2f GB/s (%s)\n",
              r.kv_gb_per_s, 100 * r.read_ratio, ceilings.read_gb_per_s,
              ceilings.read_huge_pages ? "huge pages, as the cache" : "4 KiB pages, as the cache");
  std::printf("compute      %.1f GFLOP/s = %.0f%% of measured ceiling %.1f GFLOP/s\n",
              r.gflop_per_s, 100 * r.flop_ratio, r.flop_ceiling_gflop_per_s);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time one attention shape on a backend against this machine's measured ceilings");
  cmd->add_option("--backend", args->backend, "Backend name")->capture_default_str();
  cmd->add_option("--heads", args->heads, "Query/KV heads, Q/KV")->capture_default_str();
  cmd->add_option("--head-size", args->head_size, "Head size")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxModelHeadSize));
  cmd->add_option("--batch", args->batch, "Requests")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxWorkloadRequests));
  cmd->add_option("--context", args->context, "Keys each request attends over")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRequestTokens));
  cmd->add_option("--query-len", args->query_len, "New tokens per request (1 = decode)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRequestTokens));
  cmd->add_flag("--causal", args->causal, "Causal prefill (else non-causal for query-len > 1)");
  cmd->add_flag("--sinks", args->sinks, "Attention sinks");
  cmd->add_option("--kv-cache-dtype", args->kv_cache_dtype,
                  "KV cache dtype (auto, bf16, fp16, fp32, fp8_e4m3, fp8_e5m2)")
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Compute dtype (bf16, fp16, fp32)")
      ->capture_default_str();
  cmd->add_option("--block-size", args->block_size, "Tokens per cache block")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxBlockSizeFlag));
  cmd->add_option("--threads", args->threads, "OpenMP threads (0 = all)")
      ->capture_default_str()
      ->check(CLI::Range(0, max_threads_flag()));
  cmd->add_option("--repeats", args->repeats, "Timed repeats (the median is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRepeatsFlag));
  cmd->add_option("--warmup", args->warmup, "Untimed warm-up runs")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxRepeatsFlag));
  cmd->add_option("--read-buffer-mb", args->read_buffer_mb,
                  "Buffer of the read-bandwidth measurement (keep it far above the caches)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--cache-resident", args->cache_resident,
                "One copy of the KV cache read by every repeat (it stays in the caches when it "
                "fits), instead of replicas rotated past 256 MiB: compares builds of a kernel by "
                "its instruction stream; its rates are not memory figures");
  add_json_flag(*cmd, args->json);
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace attnkit::cli
