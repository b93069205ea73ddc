// The cost of one AttentionStack::forward() call made directly from C++: the figure that
// bench/python_overhead.py sets the same call from Python against, timed the same way.
//
//   stack_overhead_bench --device cpu|cuda --dtype float32|bfloat16|float16 --batch B
//                        --context C [--model NAME] [--layer L] [--calls N]
//                        [--kv-cache-bytes N]
//                        [google benchmark flags, e.g. --benchmark_format=json]
//
// The stack is the model's (llama-3.1-8b-instruct by default): B requests whose first C
// tokens are in the cache (written by a real prefill of random rows, one request a step),
// then one decode step planned for all of them. One timed sample is N back-to-back forward() calls
// of layer L on that step, measured by the host's wall clock; the device is synchronised after the
// sample, outside the timed region. On the CPU a call is the whole attention; on CUDA it is what
// the host spends to launch it, since N calls' launches fit in the launch queue without waiting on
// the GPU. An iteration is one sample: the reported time is per sample (divide by N, which the
// counter calls_per_sample gives).
#include <benchmark/benchmark.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attnkit/core/device_memory.h"
#include "attnkit/core/enums.h"
#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/core/platform.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/runtime/attention_stack.h"

namespace {

using namespace attnkit;

struct Options {
  std::string device = "cpu";
  std::string dtype = "float32";
  std::string model = "llama-3.1-8b-instruct";
  int layer = 0;
  int batch = 1;
  int context = 16;
  int calls = 100;
  size_t kv_cache_bytes = size_t{256} << 20;
};

// A tensor of random values in memory from `memory` (host or device), owned here.
struct Rows {
  DeviceBuffer buffer;
  TensorView view;
};

Rows random_rows(DeviceMemory& memory, Device device, ScalarType dtype, int64_t tokens,
                 int64_t heads, int64_t head_size, std::mt19937& rng) {
  const int64_t n = tokens * heads * head_size;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * size_of(dtype));
  for (int64_t i = 0; i < n; ++i) store_from_float(bytes.data(), dtype, i, normal(rng));
  Rows rows{DeviceBuffer(memory, bytes.size()), {}};
  memory.copy_to_device(rows.buffer.data(), bytes.data(), bytes.size());
  rows.view = TensorView::contiguous(rows.buffer.data(), dtype, {tokens, heads, head_size}, device);
  return rows;
}

// One layer's query, key, value and output rows for a step of `tokens` rows.
struct StepRows {
  Rows q, k, v, out;
};

StepRows step_rows(DeviceMemory& memory, const AttentionStack& stack, int layer, int64_t tokens,
                   std::mt19937& rng) {
  const AttentionLayerParams& p = stack.layer(layer).params;
  const ScalarType t = scalar_type_of(stack.dtype());
  const Device d = stack.device();
  return {random_rows(memory, d, t, tokens, p.num_heads, p.head_size, rng),
          random_rows(memory, d, t, tokens, p.num_kv_heads, p.head_size, rng),
          random_rows(memory, d, t, tokens, p.num_kv_heads, p.head_size_v, rng),
          random_rows(memory, d, t, tokens, p.num_heads, p.head_size_v, rng)};
}

void run(benchmark::State& state, const Options& o) {
  const bool cuda = o.device == "cuda";
  std::unique_ptr<DeviceMemory> memory = cuda ? make_cuda_memory(0) : make_host_memory();
  AttentionStackOptions so;
  if (cuda) {
    const std::optional<Platform> local = local_cuda_platform(0);
    if (!local) throw Error(ErrorCode::kUnsupported, "--device cuda: no CUDA device here");
    so.platform = *local;
  }
  so.dtype = parse<DType>(o.dtype);
  so.kv_cache_bytes = o.kv_cache_bytes;
  AttentionStack stack(load_model(o.model), so);
  std::mt19937 rng(20261202);

  // One prefill step per request (a step holds at most the limits' max_num_tokens).
  std::vector<StepRequest> decode;
  for (int r = 0; r < o.batch; ++r) {
    stack.add_request(r);
    const StepRequest prefill{r, 0, o.context};
    stack.plan_step({&prefill, 1});
    StepRows rows = step_rows(*memory, stack, o.layer, o.context, rng);
    stack.forward(o.layer, rows.q.view, rows.k.view, rows.v.view, rows.out.view);
    memory->synchronize();
    decode.push_back({r, o.context, 1});
  }

  stack.plan_step(decode);
  StepRows step = step_rows(*memory, stack, o.layer, o.batch, rng);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.calls; ++i) {
      stack.forward(o.layer, step.q.view, step.k.view, step.v.view, step.out.view);
    }
    const auto stop = std::chrono::steady_clock::now();
    memory->synchronize();
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
  }
  state.counters["calls_per_sample"] = o.calls;
  state.SetLabel(stack.layer(o.layer).selection->backend);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Options o;
  CLI::App app{"The cost of one AttentionStack::forward() call from C++"};
  app.add_option("--device", o.device)->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", o.dtype)->check(CLI::IsMember({"float32", "bfloat16", "float16"}));
  app.add_option("--model", o.model);
  app.add_option("--layer", o.layer)->check(CLI::NonNegativeNumber);
  app.add_option("--batch", o.batch)->check(CLI::PositiveNumber);
  app.add_option("--context", o.context)->check(CLI::PositiveNumber);
  app.add_option("--calls", o.calls)->check(CLI::PositiveNumber);
  app.add_option("--kv-cache-bytes", o.kv_cache_bytes)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const std::string name = "stack_forward/" + o.device + "/" + o.dtype + "/b" +
                           std::to_string(o.batch) + "_c" + std::to_string(o.context);
  benchmark::RegisterBenchmark(name.c_str(),
                               [&o](benchmark::State& state) {
                                 try {
                                   run(state, o);
                                 } catch (const attnkit::Error& e) {
                                   state.SkipWithError(e.what());
                                 }
                               })
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
