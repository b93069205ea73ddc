// CPU attention benchmark (issue 6): measures this machine's read bandwidth and FLOP
// ceilings, then times CPU_FLASH on each shape of the issue and reports achieved KV GB/s
// (decode) and GFLOP/s (prefill) as fractions of those ceilings, plus the speedup over a
// straightforward scalar implementation and over REFERENCE, all in the same run.
//
//   cpu_attention_bench [--threads N] [--repeats N] [--no-reference] [--no-baseline]
//                       [--only SUBSTRING] [--cache-resident]
//
// --cache-resident keeps one copy of the KV cache (TimingOptions::cache_resident): for
// comparing two builds of a kernel by its instruction stream, not for bandwidth figures. A
// shape small enough to stay in the CPU's caches: `attnkit bench --cache-resident ...`.
//
// The machine's load average is printed before and after: on a shared machine the median
// wall time includes time the threads waited for a core, so the table also gives the
// ratio of the fastest repeat ("best %"), which is the least disturbed one, and the ratio by
// CPU time ("CPU-time %": both the kernel and the ceilings timed by the CPU time their
// threads got; see machine_ceilings.h).

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "attnkit/bench/attention_bench.h"
#include "attnkit/bench/machine_ceilings.h"
#include "attnkit/bench/scalar_baseline.h"
#include "attnkit/core/error.h"
#include "attnkit/kernels/cpu_isa.h"
#include "attnkit/registry/registry.h"

namespace {

using attnkit::bench::BenchShape;

struct Target {
  enum Kind { kNone, kReadBandwidth, kRoofline, kFlops } kind = kNone;
  double ratio = 0.0;
};

struct Case {
  BenchShape shape;
  Target target;
};

std::vector<Case> issue_shapes() {
  std::vector<Case> cases;
  auto decode = [](const char* name, int h, int kv, int d, int b, int ctx) {
    return BenchShape::uniform(name, h, kv, d, b, ctx, 1);
  };
  cases.push_back({decode("decode 32/8 d128 b1 ctx4096", 32, 8, 128, 1, 4096), {}});
  cases.push_back({decode("decode 32/8 d128 b1 ctx16384", 32, 8, 128, 1, 16384), {}});
  cases.push_back(
      {decode("decode 32/8 d128 b8 ctx4096", 32, 8, 128, 8, 4096), {Target::kReadBandwidth, 0.70}});
  cases.push_back({decode("decode 32/8 d128 b8 ctx16384", 32, 8, 128, 8, 16384), {}});
  cases.push_back({decode("decode 32/8 d128 b32 ctx1024", 32, 8, 128, 32, 1024), {}});
  cases.push_back({decode("decode gemma3-1b 4/1 d256 b8 ctx4096", 4, 1, 256, 8, 4096),
                   {Target::kReadBandwidth, 0.70}});
  BenchShape gpt = decode("decode gpt-oss 64/8 d64 sinks b8 ctx4096", 64, 8, 64, 8, 4096);
  gpt.sinks = true;
  cases.push_back({gpt, {Target::kRoofline, 0.50}});
  cases.push_back(
      {BenchShape::uniform("prefill 32/8 d128 512 causal", 32, 8, 128, 1, 512, 512), {}});
  cases.push_back({BenchShape::uniform("prefill 32/8 d128 2048 causal", 32, 8, 128, 1, 2048, 2048),
                   {Target::kFlops, 0.40}});
  BenchShape mixed;
  mixed.name = "mixed 4x256 prefill + 28 decode ctx2048";
  mixed.num_heads = 32;
  mixed.num_kv_heads = 8;
  mixed.head_size = 128;
  mixed.q_lens.assign(4, 256);
  mixed.q_lens.insert(mixed.q_lens.end(), 28, 1);
  mixed.kv_lens.assign(32, 2048);
  cases.push_back({mixed, {}});
  return cases;
}

// The first three fields of /proc/loadavg ("?" where it cannot be read).
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "?";
  return a + " " + b + " " + c;
}

// The ratio a shape's target is about (or, without a target, the natural one: read
// bandwidth for decode, FLOP ceiling otherwise), from the wall-clock rates or (cpu) the
// CPU-time ones.
double target_ratio(const Case& c, const attnkit::bench::BenchReport& r, bool cpu = false) {
  const double read = cpu ? r.read_ratio_cpu : r.read_ratio;
  const double flop = cpu ? r.flop_ratio_cpu : r.flop_ratio;
  switch (c.target.kind) {
    case Target::kReadBandwidth:
      return read;
    case Target::kRoofline:
      return std::max(read, flop);
    case Target::kFlops:
      return flop;
    case Target::kNone:
      break;
  }
  const bool decode =
      std::all_of(c.shape.q_lens.begin(), c.shape.q_lens.end(), [](int q) { return q == 1; });
  return decode ? read : flop;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, repeats = 9;
  bool reference = true, baseline = true;
  bool cache_resident = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (a == "--no-reference") {
      reference = false;
    } else if (a == "--no-baseline") {
      baseline = false;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--cache-resident") {
      cache_resident = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--repeats N] [--no-reference] [--no-baseline] "
                   "[--only SUBSTRING] [--cache-resident]\n",
                   argv[0]);
      return 2;
    }
  }
  if (threads > 0) omp_set_num_threads(threads);
  threads = omp_get_max_threads();
  try {
    auto& registry = attnkit::global_registry();
    const auto flash = registry.get("CPU_FLASH");
    const bool have_reference = reference && registry.contains("REFERENCE");
    const auto ceilings = attnkit::bench::measure_machine_ceilings(threads);
    std::printf("load average at start: %s\n", load_average().c_str());
    std::printf("threads %d, cpu isa %s\n", threads,
                std::string(attnkit::cpu::to_string(attnkit::cpu::active_cpu_isa())).c_str());
    std::printf(
        "ceilings: read %.2f GB/s (%s), fp32 FMA (%s) %.1f GFLOP/s, bf16 dot %.1f GFLOP/s, AMX "
        "bf16 %.1f GFLOP/s\n",
        ceilings.read_gb_per_s, ceilings.read_huge_pages ? "huge pages" : "4 KiB pages",
        ceilings.fma_isa, ceilings.fma_gflop_per_s, ceilings.bf16_dot_gflop_per_s,
        ceilings.amx_bf16_gflop_per_s);
    std::printf(
        "ceilings by CPU time: read %.2f GB/s, fp32 FMA %.1f GFLOP/s, bf16 dot %.1f GFLOP/s, AMX "
        "bf16 %.1f GFLOP/s\n\n",
        ceilings.read_gb_per_s_cpu, ceilings.fma_gflop_per_s_cpu, ceilings.bf16_dot_gflop_per_s_cpu,
        ceilings.amx_bf16_gflop_per_s_cpu);
    std::printf(
        "| shape | median ms | min ms | KV GB/s | %% read BW | GFLOP/s | %% FLOP ceiling | best %% "
        "| "
        "CPU-time %% | x scalar | x REFERENCE | target |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    attnkit::bench::TimingOptions options;
    options.repeats = repeats;
    options.cache_resident = cache_resident;
    if (cache_resident) {
      std::printf(
          "cache-resident: one copy of each KV cache, read by every repeat; the %% columns "
          "compare with DRAM ceilings\n\n");
    }
    for (const Case& c : issue_shapes()) {
      if (!only.empty() && c.shape.name.find(only) == std::string::npos) continue;
      const auto t = attnkit::bench::time_backend(*flash, c.shape, options);
      const auto r = attnkit::bench::make_report(c.shape, t, ceilings);
      std::string vs_scalar = "-", vs_ref = "-";
      if (baseline) {
        const auto b = attnkit::bench::time_scalar_baseline(c.shape, options);
        vs_scalar = std::to_string(b.median_us / t.median_us).substr(0, 6);
      }
      if (have_reference) {
        // REFERENCE accumulates in double one row at a time; on large shapes it is timed
        // on one KV head's query group and scaled (every KV head costs the same).
        attnkit::bench::TimingOptions ref_options;
        ref_options.warmup = 1;
        ref_options.repeats = 3;
        const auto work = attnkit::bench::bench_work(c.shape);
        const bool sample = work.flops > 4e9 && c.shape.num_kv_heads > 1;
        const BenchShape s = sample ? attnkit::bench::one_kv_head(c.shape) : c.shape;
        const auto rt = attnkit::bench::time_backend(*registry.get("REFERENCE"), s, ref_options);
        const double ref_us = rt.median_us * (sample ? c.shape.num_kv_heads : 1);
        vs_ref = std::to_string(ref_us / t.median_us).substr(0, 6);
      }
      std::string verdict = "-";
      const double achieved = target_ratio(c, r);
      // The same ratio at the fastest repeat.
      attnkit::bench::Timing fastest = t;
      fastest.median_us = t.min_us;
      const double best = target_ratio(c, attnkit::bench::make_report(c.shape, fastest, ceilings));
      if (c.target.kind != Target::kNone) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%s (%.0f%% vs >= %.0f%%)",
                      achieved >= c.target.ratio ? "met" : "MISSED", 100 * achieved,
                      100 * c.target.ratio);
        verdict = buf;
      }
      std::printf(
          "| %s | %.3f | %.3f | %.2f | %.0f%% | %.1f | %.0f%% | %.0f%% | %.0f%% | %s | %s | %s |\n",
          c.shape.name.c_str(), t.median_us / 1000, t.min_us / 1000, r.kv_gb_per_s,
          100 * r.read_ratio, r.gflop_per_s, 100 * r.flop_ratio, 100 * best,
          100 * target_ratio(c, r, true), vs_scalar.c_str(), vs_ref.c_str(), verdict.c_str());
      std::fflush(stdout);
    }
    std::printf("\nload average at end: %s\n", load_average().c_str());
  } catch (const attnkit::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
