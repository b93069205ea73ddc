// CUDA_MLA decode benchmark (issue 9): DeepSeek-style MLA decode through the library path
// (builder + forward, the one-token cache update included) against the device-to-device
// copy bandwidth measured in the same run.
//
//   mla_cuda_bench [--quick] [--large-rows-only]
//
// Shapes: 128 and 16 query heads, batch 64 and 128, context 4096 and 8192, page 64, bf16
// queries/outputs and a bf16 latent cache (576 values per token), plus fp8 e4m3 rows at
// batch 128. "cache GB/s" = latent bytes the step must read (batch * context * 576 * element
// size) / time; "% copy" = that against the copy bandwidth (bytes read + written / time);
// TFLOP/s counts 2 * heads * keys * (576 + 512) per request. Each shape rotates over
// disjoint sets of cache blocks (>= ~2 GB in all, block tables shuffled) so that repeated
// calls do not read the 60 MB L2. Each figure is the median of 7 timed batches.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attnkit/bench/mla_decode.h"
#include "attnkit/build_config.h"
#include "attnkit/core/numeric.h"
#include "attnkit/core/options.h"
#include "attnkit/core/platform.h"
#include "attnkit/explain/explain.h"
#include "attnkit/kernels/mla_geometry.h"
#include "attnkit/registry/registry.h"

#if ATTNKIT_HAS_CUDA
#include <cuda_runtime.h>

#include "cuda_timing.h"

namespace {

using namespace attnkit;
using namespace attnkit::bench;

// Fills `bytes` of device memory with a 16 MiB random pattern, repeated: bf16 in [-1, 1],
// or (fp8) e4m3 bytes in about [-1, 1] (sign, exponent 0..7, any mantissa).
void fill_random(void* dst, size_t bytes, bool fp8, std::mt19937& rng) {
  std::vector<uint16_t> pattern(8u << 20);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& v : pattern) {
    if (fp8) {
      auto e4m3 = [&] { return static_cast<uint16_t>(byte(rng) & 0xbf); };  // |x| < 2
      v = static_cast<uint16_t>(e4m3() | (e4m3() << 8));
    } else {
      v = float_to_bf16_bits(u(rng));
    }
  }
  fill_repeated(dst, bytes, pattern);
}

struct Shape {
  int heads, batch, context;
  bool fp8 = false;
};

struct Result {
  Shape shape;
  double ms = 0, gbs = 0, pct_copy = 0, tflops = 0;
};

Result run_shape(const Shape& s, double copy_gbs, std::mt19937& rng) {
  constexpr int kPage = 64, kLatent = kMlaLatentDim, kRank = kMlaValueDim;
  const int H = s.heads, T = s.batch;  // one query token per request
  const size_t esz = s.fp8 ? 1 : 2;
  const int blocks_per_seq = (s.context + kPage - 1) / kPage;
  const size_t block_bytes = static_cast<size_t>(kPage) * kLatent * esz;
  const size_t set_bytes = static_cast<size_t>(s.batch) * blocks_per_seq * block_bytes;
  const int sets = static_cast<int>(std::clamp<size_t>((size_t{2} << 30) / set_bytes + 1, 1, 8));
  const int total_blocks = sets * s.batch * blocks_per_seq;

  DeviceBuffer cache = device_buffer(static_cast<size_t>(total_blocks) * block_bytes);
  fill_random(cache.data(), static_cast<size_t>(total_blocks) * block_bytes, s.fp8, rng);
  DeviceBuffer q = device_buffer(static_cast<size_t>(T) * H * kLatent * 2),
               out = device_buffer(static_cast<size_t>(T) * H * kRank * 2);
  DeviceBuffer key = device_buffer(static_cast<size_t>(T) * kLatent * 2);
  fill_random(q.data(), static_cast<size_t>(T) * H * kLatent * 2, false, rng);
  fill_random(key.data(), static_cast<size_t>(T) * kLatent * 2, false, rng);

  bench::MlaDecodeShape shape;
  shape.heads = H;
  shape.batch = s.batch;
  shape.context = s.context;
  shape.block_size = kPage;
  shape.kv_cache_dtype = s.fp8 ? KvCacheDType::kFp8E4M3 : KvCacheDType::kAuto;
  const bench::MlaDecodePlans step =
      bench::plan_mla_decode(*BackendRegistry().get("CUDA_MLA"), shape, sets, rng);

  const Device dev{DeviceType::kCuda, 0};
  KvCacheTensors kv;
  kv.layout = KvLayout::kNHD;
  kv.block_size = kPage;
  kv.key =
      TensorView::contiguous(cache.data(), s.fp8 ? ScalarType::kFp8E4M3 : ScalarType::kBFloat16,
                             {total_blocks, kPage, 1, kLatent}, dev);
  const TensorView qv =
      TensorView::contiguous(q.data(), ScalarType::kBFloat16, {T, H, kLatent}, dev);
  const TensorView ov =
      TensorView::contiguous(out.data(), ScalarType::kBFloat16, {T, H, kRank}, dev);
  const TensorView keyv =
      TensorView::contiguous(key.data(), ScalarType::kBFloat16, {T, 1, kLatent}, dev);

  Result r;
  r.shape = s;
  r.ms = median_ms([&](int i) {
    step.impl->forward(qv, keyv, TensorView(), kv, *step.plans[static_cast<size_t>(i % sets)], ov);
  });
  check(cudaDeviceSynchronize(), "forward");
  r.gbs = static_cast<double>(set_bytes) / (r.ms * 1e-3) / 1e9;
  r.pct_copy = 100.0 * r.gbs / copy_gbs;
  const double flops = 2.0 * H * static_cast<double>(s.batch) * s.context * (kLatent + kRank);
  r.tflops = flops / (r.ms * 1e-3) / 1e12;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, large_rows_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--large-rows-only") == 0) {
      large_rows_only = true;
    } else {
      std::fprintf(stderr, "unknown argument '%s' (valid: --quick, --large-rows-only)\n", argv[i]);
      return 2;
    }
  }
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
  const std::optional<Platform> platform = local_cuda_platform(0);
  const std::string variant = platform ? kernel_variant("CUDA_MLA", *platform) : "unknown";
  const std::string options = describe_options_in_force();
  std::printf("kernels: %s (%zu bytes of shared memory per block allowed)%s%s\n", variant.c_str(),
              prop.sharedMemPerBlockOptin, options.empty() ? "" : "; options ", options.c_str());

  std::vector<Shape> shapes;
  for (int heads : {128, 16}) {
    for (int batch : {64, 128}) {
      for (int context : {4096, 8192}) shapes.push_back({heads, batch, context});
    }
  }
  for (int heads : {128, 16}) shapes.push_back({heads, 128, 8192, true});
  // The large-row shapes alone: with ATTNKIT_CUDA_MLA_SM90_TILES=0 in a second run, the
  // tiles sm_80 runs on the same card (bench/mla_cuda_device_run.sh).
  if (large_rows_only) shapes = {{128, 128, 8192}, {128, 128, 8192, true}};
  if (quick) shapes = {{128, 128, 4096}, {16, 128, 4096}};

  std::printf("\n| heads | batch | context | cache | ms | cache GB/s | %% of copy | TFLOP/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    const Result r = run_shape(s, copy_gbs, rng);
    const std::string cache = s.fp8 ? "fp8_e4m3" : "bf16";
    std::printf("| %d | %d | %d | %s | %.4f | %.0f | %.1f | %.1f |\n", s.heads, s.batch, s.context,
                cache.c_str(), r.ms, r.gbs, r.pct_copy, r.tflops);
    std::fflush(stdout);
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
