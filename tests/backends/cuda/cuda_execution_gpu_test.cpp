// The GPU execution contract (core/execution.h) of CUDA_FLASH, CUDA_PAGED and CUDA_MLA:
//   - build() and forward() on a caller's non-blocking stream with other work queued on it
//     run after that work and return without waiting for it;
//   - after reserve(), a decode step captured once into a CUDA graph and replayed after
//     each new build (new sequence lengths, block tables, slots, tensors' contents; the
//     cache growing into new blocks) gives exactly what the same steps give eagerly, for
//     several batch sizes, a padded batch and a uniform multi-token batch;
//   - a step beyond the reserved limits is refused naming the bound.
// Outputs are checked against REFERENCE (exact) run on host copies, bf16/fp16 relative L2
// within 2e-2 / 5e-3 (the CUDA conformance tolerances). Skipped without a GPU.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/registry/registry.h"
#include "gpu_harness.h"

#if ATTNKIT_HAS_CUDA
#include <cuda_runtime.h>

namespace attnkit::testing {
namespace {

void check(cudaError_t status, const char* what) {
  ASSERT_EQ(status, cudaSuccess) << what << ": " << cudaGetErrorString(status);
}

// Device memory of `bytes`, freed on scope exit.
struct DeviceArray {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceArray(size_t n) : bytes(n) {
    if (cudaMalloc(&ptr, std::max<size_t>(n, 16)) != cudaSuccess) throw std::bad_alloc();
  }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> host(bytes);
    if (bytes) cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost);
    return host;
  }
};

// Pinned host memory (asynchronous uploads that do not wait for the stream).
struct PinnedBytes {
  uint8_t* ptr = nullptr;
  size_t bytes = 0;
  explicit PinnedBytes(size_t n) : bytes(n) {
    void* p = nullptr;
    if (cudaMallocHost(&p, std::max<size_t>(n, 16)) != cudaSuccess) throw std::bad_alloc();
    ptr = static_cast<uint8_t*>(p);
  }
  ~PinnedBytes() { cudaFreeHost(ptr); }
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(s); }
};

struct LayerCase {
  std::string backend;
  AttentionLayerParams layer;
  int block_size = 16;
};

LayerCase flash_case() {
  LayerCase c{"CUDA_FLASH", {}, 16};
  c.layer.num_heads = 32;
  c.layer.num_kv_heads = 8;
  c.layer.head_size = c.layer.head_size_v = 128;
  c.layer.dtype = DType::kBFloat16;
  return c;
}

LayerCase paged_case() {
  LayerCase c{"CUDA_PAGED", {}, 16};
  c.layer.num_heads = 16;
  c.layer.num_kv_heads = 4;
  c.layer.head_size = c.layer.head_size_v = 96;
  c.layer.dtype = DType::kFloat16;
  return c;
}

LayerCase mla_case() {
  LayerCase c{"CUDA_MLA", {}, 64};
  c.layer.kind = KvCacheKind::kMlaAttention;
  c.layer.num_heads = 16;
  c.layer.num_kv_heads = 1;
  c.layer.head_size = 576;
  c.layer.head_size_v = 512;
  c.layer.use_mla = true;
  c.layer.mla_rope_dim = 64;
  c.layer.dtype = DType::kBFloat16;
  return c;
}

double tolerance(DType dtype) { return dtype == DType::kBFloat16 ? 2e-2 : 5e-3; }

// One layer's paged cache, query/fresh K/V/output tensors (device) for a batch of fixed
// shape: num_reqs requests of q_len tokens each (the last `pad` of them padding: one
// position in the null block 0, no cache write), and the host-side batch state.
class DecodeBatch {
 public:
  DecodeBatch(const LayerCase& lc, int num_reqs, int pad, int q_len, int max_blocks, uint64_t seed)
      : lc_(lc),
        layer_(lc.layer),
        compute_(scalar_type_of(lc.layer.dtype)),
        esz_(size_of(compute_)),
        num_reqs_(num_reqs),
        pad_(pad),
        q_len_(q_len),
        max_blocks_(max_blocks),
        rng_(seed) {
    layer_.scale = 1.0f / std::sqrt(static_cast<float>(layer_.head_size));
    backend_ = global_registry().get(lc.backend);
    layout_ = backend_->kv_layout();
    const int bs = lc.block_size;
    num_blocks_ = num_reqs * max_blocks + 1;  // block 0: the padding requests' null block
    const int64_t kvh = layer_.num_kv_heads;
    block_elems_ = static_cast<int64_t>(bs) * kvh * layer_.head_size;
    T_ = num_reqs * q_len;
    // Lengths: real requests start at random lengths, padding at q_len (block 0).
    std::uniform_int_distribution<int> len(q_len, 5 * bs + 3);
    std::vector<int32_t> free(static_cast<size_t>(num_blocks_ - 1));
    std::iota(free.begin(), free.end(), 1);
    std::shuffle(free.begin(), free.end(), rng_);
    free_ = free;
    seq_lens_.resize(static_cast<size_t>(num_reqs));
    tables_.assign(static_cast<size_t>(num_reqs), {});
    for (int i = 0; i < num_reqs; ++i) {
      seq_lens_[static_cast<size_t>(i)] = is_pad(i) ? q_len : len(rng_);
      grow_table(i);
    }
  }

  bool is_pad(int i) const { return i >= num_reqs_ - pad_; }
  int tokens() const { return T_; }
  const AttentionLayerParams& layer() const { return layer_; }
  const AttentionBackend& backend() const { return *backend_; }
  StepLimits limits() const { return {num_reqs_, T_, max_blocks_, max_blocks_ * lc_.block_size}; }
  KvCacheSpec spec() const {
    KvCacheSpec spec;
    spec.kind = layer_.kind;
    spec.block_size = lc_.block_size;
    spec.num_kv_heads = layer_.num_kv_heads;
    spec.head_size = layer_.head_size;
    spec.head_size_v = layer_.use_mla ? 0 : layer_.head_size_v;
    spec.dtype = compute_;
    return spec;
  }
  size_t cache_bytes() const { return static_cast<size_t>(num_blocks_ * block_elems_) * esz_; }
  size_t output_bytes() const {
    return static_cast<size_t>(T_) * layer_.num_heads * layer_.head_size_v * esz_;
  }
  bool has_value_cache() const { return !layer_.use_mla; }

  // Random finite contents for a whole cache (every slot a kernel may read).
  std::vector<uint8_t> random_cache() {
    std::vector<uint8_t> bytes(cache_bytes());
    fill_random(bytes.data(), num_blocks_ * block_elems_);
    return bytes;
  }

  // The next step: every real request grows by q_len tokens (taking a new block when it
  // crosses one), fresh random q/k/v in host memory.
  void advance() {
    for (int i = 0; i < num_reqs_; ++i) {
      if (is_pad(i)) continue;
      seq_lens_[static_cast<size_t>(i)] += q_len_;
      grow_table(i);
    }
  }

  CommonAttentionMetadata common() const {
    CommonAttentionMetadata c;
    c.num_reqs = num_reqs_;
    c.num_actual_tokens = T_;
    c.query_start_loc.push_back(0);
    for (int i = 0; i < num_reqs_; ++i) c.query_start_loc.push_back((i + 1) * q_len_);
    c.seq_lens = seq_lens_;
    c.max_blocks_per_req = max_blocks_;
    c.block_size = lc_.block_size;
    c.block_table.assign(static_cast<size_t>(num_reqs_ * max_blocks_), 0);
    for (int i = 0; i < num_reqs_; ++i) {
      const auto& t = tables_[static_cast<size_t>(i)];
      std::copy(t.begin(), t.end(),
                c.block_table.begin() + static_cast<ptrdiff_t>(i) * max_blocks_);
    }
    for (int i = 0; i < num_reqs_; ++i) {
      const int seq = seq_lens_[static_cast<size_t>(i)];
      for (int j = 0; j < q_len_; ++j) {
        const int pos = seq - q_len_ + j;
        const int32_t block =
            tables_[static_cast<size_t>(i)][static_cast<size_t>(pos / lc_.block_size)];
        c.slot_mapping.push_back(
            is_pad(i) ? -1 : static_cast<int64_t>(block) * lc_.block_size + pos % lc_.block_size);
      }
      c.max_seq_len = std::max(c.max_seq_len, seq);
    }
    c.max_query_len = q_len_;
    c.causal = true;
    return c;
  }

  std::vector<uint8_t> random_rows(int64_t rows, int width) {
    std::vector<uint8_t> bytes(static_cast<size_t>(rows * width) * esz_);
    fill_random(bytes.data(), rows * width);
    return bytes;
  }
  int q_width() const { return layer_.num_heads * layer_.head_size; }
  int k_width() const { return layer_.num_kv_heads * layer_.head_size; }
  int v_width() const { return layer_.num_kv_heads * layer_.head_size_v; }

  KvCacheTensors cache_view(void* k, void* v, DeviceType device) const {
    KvCacheTensors cache;
    cache.layout = layout_;
    cache.block_size = lc_.block_size;
    const Device dev{device, 0};
    const int64_t nb = num_blocks_, bs = lc_.block_size, kvh = layer_.num_kv_heads;
    const int64_t d = layer_.head_size, dv = layer_.head_size_v;
    if (layout_ == KvLayout::kHND) {
      cache.key = TensorView::contiguous(k, compute_, {nb, kvh, bs, d}, dev);
      cache.value = TensorView::contiguous(v, compute_, {nb, kvh, bs, dv}, dev);
    } else {
      cache.key = TensorView::contiguous(k, compute_, {nb, bs, kvh, d}, dev);
      if (v != nullptr) cache.value = TensorView::contiguous(v, compute_, {nb, bs, kvh, dv}, dev);
    }
    return cache;
  }
  TensorView rows(void* data, int heads, int width, DeviceType device) const {
    return TensorView::contiguous(data, compute_, {T_, heads, width}, Device{device, 0});
  }
  TensorView q_view(void* p, DeviceType d) const {
    return rows(p, layer_.num_heads, layer_.head_size, d);
  }
  TensorView k_view(void* p, DeviceType d) const {
    return rows(p, layer_.num_kv_heads, layer_.head_size, d);
  }
  TensorView v_view(void* p, DeviceType d) const {
    return layer_.use_mla ? TensorView{} : rows(p, layer_.num_kv_heads, layer_.head_size_v, d);
  }
  TensorView out_view(void* p, DeviceType d) const {
    return rows(p, layer_.num_heads, layer_.head_size_v, d);
  }

  // Relative L2 of `got` against `want` over the real requests' rows.
  double rel_l2(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) const {
    const int64_t row = static_cast<int64_t>(layer_.num_heads) * layer_.head_size_v;
    double err = 0, ref = 0;
    for (int i = 0; i < num_reqs_; ++i) {
      if (is_pad(i)) continue;
      for (int64_t e = static_cast<int64_t>(i) * q_len_ * row;
           e < static_cast<int64_t>(i + 1) * q_len_ * row; ++e) {
        const double g = load_as_float(got.data(), compute_, e);
        const double w = load_as_float(want.data(), compute_, e);
        if (!std::isfinite(g)) return INFINITY;
        err += (g - w) * (g - w);
        ref += w * w;
      }
    }
    return std::sqrt(err / std::max(ref, 1e-30));
  }
  // Whether the real requests' rows of two outputs are bit for bit equal.
  bool same_real_rows(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) const {
    const size_t row = static_cast<size_t>(layer_.num_heads) * layer_.head_size_v * esz_;
    for (int i = 0; i < num_reqs_; ++i) {
      if (is_pad(i)) continue;
      const size_t begin = static_cast<size_t>(i) * q_len_ * row, n = q_len_ * row;
      if (std::memcmp(a.data() + begin, b.data() + begin, n) != 0) return false;
    }
    return true;
  }

  // REFERENCE over host copies of the cache (already holding this step's K/V) and q.
  std::vector<uint8_t> reference(std::vector<uint8_t> k_cache, std::vector<uint8_t> v_cache,
                                 std::vector<uint8_t> q, std::vector<uint8_t> key,
                                 std::vector<uint8_t> value) const {
    auto ref = global_registry().get("REFERENCE");
    CommonAttentionMetadata c = common();
    std::fill(c.slot_mapping.begin(), c.slot_mapping.end(), -1);  // K/V already cached
    auto builder = ref->make_builder(spec(), layer_);
    auto impl = ref->make_impl(layer_);
    std::vector<uint8_t> out(output_bytes(), 0xff);
    const AttentionMetadata& meta = builder->build(c);
    impl->forward(
        q_view(q.data(), DeviceType::kCpu), k_view(key.data(), DeviceType::kCpu),
        v_view(value.data(), DeviceType::kCpu),
        cache_view(k_cache.data(), has_value_cache() ? v_cache.data() : nullptr, DeviceType::kCpu),
        meta, out_view(out.data(), DeviceType::kCpu));
    return out;
  }

 private:
  void grow_table(int i) {
    auto& t = tables_[static_cast<size_t>(i)];
    const int needed = (seq_lens_[static_cast<size_t>(i)] + lc_.block_size - 1) / lc_.block_size;
    ASSERT_LE(needed, max_blocks_);
    while (static_cast<int>(t.size()) < needed) {
      if (is_pad(i)) {
        t.push_back(0);
      } else {
        t.push_back(free_.back());
        free_.pop_back();
      }
    }
  }
  void fill_random(uint8_t* data, int64_t n) {
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (int64_t e = 0; e < n; ++e) store_from_float(data, compute_, e, uni(rng_));
  }

  LayerCase lc_;
  AttentionLayerParams layer_;
  ScalarType compute_;
  size_t esz_;
  int num_reqs_, pad_, q_len_, max_blocks_;
  std::mt19937_64 rng_;
  std::shared_ptr<const AttentionBackend> backend_;
  KvLayout layout_ = KvLayout::kNHD;
  int num_blocks_ = 0;
  int64_t block_elems_ = 0;
  int T_ = 0;
  std::vector<int32_t> seq_lens_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> free_;
};

// One engine's device state: its builder, implementation and cache.
struct Engine {
  std::unique_ptr<MetadataBuilder> builder;
  std::unique_ptr<AttentionImpl> impl;
  DeviceArray k_cache, v_cache, out;
  Engine(DecodeBatch& batch, const std::vector<uint8_t>& k_init, const std::vector<uint8_t>& v_init)
      : builder(batch.backend().make_builder(batch.spec(), batch.layer())),
        impl(batch.backend().make_impl(batch.layer())),
        k_cache(batch.cache_bytes()),
        v_cache(batch.has_value_cache() ? batch.cache_bytes() : 0),
        out(batch.output_bytes()) {
    cudaMemcpy(k_cache.ptr, k_init.data(), k_init.size(), cudaMemcpyHostToDevice);
    if (batch.has_value_cache()) {
      cudaMemcpy(v_cache.ptr, v_init.data(), v_init.size(), cudaMemcpyHostToDevice);
    }
    cudaMemset(out.ptr, 0xff, out.bytes);  // NaN: unwritten rows show
    builder->reserve(batch.limits());
  }
  KvCacheTensors cache(const DecodeBatch& batch) const {
    return batch.cache_view(k_cache.ptr, batch.has_value_cache() ? v_cache.ptr : nullptr,
                            DeviceType::kCuda);
  }
};

struct GraphCaseParam {
  std::string name;
  LayerCase (*layer)();
  int num_reqs;
  int pad;
  int q_len;
};
void PrintTo(const GraphCaseParam& p, std::ostream* os) { *os << p.name; }

class CudaGraphGpuTest : public ::testing::TestWithParam<GraphCaseParam> {};

TEST_P(CudaGraphGpuTest, ReplayAfterEachBuildEqualsEagerSteps) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const GraphCaseParam& p = GetParam();
  const LayerCase lc = p.layer();
  DecodeBatch batch(lc, p.num_reqs, p.pad, p.q_len, /*max_blocks=*/24, std::random_device{}());
  const CudaGraphSupport support = batch.backend().capabilities().cuda_graphs;
  ASSERT_NE(support, CudaGraphSupport::kNever) << lc.backend << " declares no graph support";
  if (p.q_len > 1) {
    ASSERT_NE(support, CudaGraphSupport::kUniformSingleTokenDecode);
  }

  const std::vector<uint8_t> k_init = batch.random_cache();
  const std::vector<uint8_t> v_init =
      batch.has_value_cache() ? batch.random_cache() : std::vector<uint8_t>{};
  Engine graphed(batch, k_init, v_init), eager(batch, k_init, v_init);
  const int T = batch.tokens();
  // Both compute dtypes of these cases are 16-bit.
  DeviceArray q(static_cast<size_t>(T) * batch.q_width() * 2),
      key(static_cast<size_t>(T) * batch.k_width() * 2),
      value(static_cast<size_t>(T) * std::max(batch.v_width(), 1) * 2);
  Stream stream;
  const ExecutionContext ctx{stream.s, /*graph_shape=*/true};
  cudaGraphExec_t exec = nullptr;

  std::vector<uint8_t> q_host, k_host, v_host;
  const int steps = 40;  // crosses block boundaries: the cache grows into new blocks
  for (int step = 0; step < steps; ++step) {
    if (step > 0) batch.advance();
    const CommonAttentionMetadata common = batch.common();
    q_host = batch.random_rows(T, batch.q_width());
    k_host = batch.random_rows(T, batch.k_width());
    v_host =
        batch.has_value_cache() ? batch.random_rows(T, batch.v_width()) : std::vector<uint8_t>{};
    check(cudaMemcpyAsync(q.ptr, q_host.data(), q_host.size(), cudaMemcpyHostToDevice, stream.s),
          "q");
    check(cudaMemcpyAsync(key.ptr, k_host.data(), k_host.size(), cudaMemcpyHostToDevice, stream.s),
          "key");
    if (!v_host.empty()) {
      check(cudaMemcpyAsync(value.ptr, v_host.data(), v_host.size(), cudaMemcpyHostToDevice,
                            stream.s),
            "value");
    }
    const TensorView qv = batch.q_view(q.ptr, DeviceType::kCuda);
    const TensorView kv = batch.k_view(key.ptr, DeviceType::kCuda);
    const TensorView vv = batch.v_view(value.ptr, DeviceType::kCuda);

    // Eagerly first: a layer's first launch configures its kernels (shared-memory opt-in),
    // which a capture should not be the first to do.
    const AttentionMetadata& eager_meta = eager.builder->build(common, ctx);
    eager.impl->forward(qv, kv, vv, eager.cache(batch), eager_meta,
                        batch.out_view(eager.out.ptr, DeviceType::kCuda), ctx);

    const AttentionMetadata& graph_meta = graphed.builder->build(common, ctx);
    if (exec == nullptr) {
      // Captured once, in global mode: any call that is not stream-ordered work on this
      // stream (a synchronising copy, an allocation, a launch elsewhere) fails the capture.
      check(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeGlobal), "begin capture");
      graphed.impl->forward(qv, kv, vv, graphed.cache(batch), graph_meta,
                            batch.out_view(graphed.out.ptr, DeviceType::kCuda), ctx);
      cudaGraph_t graph = nullptr;
      check(cudaStreamEndCapture(stream.s, &graph), "end capture");
      check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
      cudaGraphDestroy(graph);
    }
    check(cudaGraphLaunch(exec, stream.s), "replay");
    check(cudaStreamSynchronize(stream.s), "step");

    const std::vector<uint8_t> out_graph = graphed.out.download();
    const std::vector<uint8_t> out_eager = eager.out.download();
    ASSERT_TRUE(batch.same_real_rows(out_graph, out_eager))
        << lc.backend << " step " << step << ": replay differs from eager, rel L2 "
        << batch.rel_l2(out_graph, out_eager);
    ASSERT_EQ(graphed.k_cache.download(), eager.k_cache.download()) << "step " << step;
    if (batch.has_value_cache()) {
      ASSERT_EQ(graphed.v_cache.download(), eager.v_cache.download()) << "step " << step;
    }
    if (step == 0 || step == steps - 1) {
      const std::vector<uint8_t> want = batch.reference(
          eager.k_cache.download(),
          batch.has_value_cache() ? eager.v_cache.download() : std::vector<uint8_t>{}, q_host,
          k_host, v_host);
      EXPECT_LT(batch.rel_l2(out_eager, want), tolerance(batch.layer().dtype))
          << lc.backend << " step " << step << " against REFERENCE";
    }
  }
  cudaGraphExecDestroy(exec);
}

INSTANTIATE_TEST_SUITE_P(Decode, CudaGraphGpuTest,
                         ::testing::Values(GraphCaseParam{"FlashB1", flash_case, 1, 0, 1},
                                           GraphCaseParam{"FlashB7", flash_case, 7, 0, 1},
                                           GraphCaseParam{"FlashB16Padded", flash_case, 16, 5, 1},
                                           GraphCaseParam{"FlashB4Q4", flash_case, 4, 0, 4},
                                           GraphCaseParam{"PagedB1", paged_case, 1, 0, 1},
                                           GraphCaseParam{"PagedB9Padded", paged_case, 9, 2, 1},
                                           GraphCaseParam{"PagedB3Q2", paged_case, 3, 0, 2},
                                           GraphCaseParam{"MlaB1", mla_case, 1, 0, 1},
                                           GraphCaseParam{"MlaB6Padded", mla_case, 6, 2, 1},
                                           GraphCaseParam{"MlaB2Q3", mla_case, 2, 0, 3}),
                         [](const ::testing::TestParamInfo<GraphCaseParam>& param_info) {
                           return param_info.param.name;
                         });

// A host function that holds the stream until the test releases it.
struct Gate {
  std::atomic<bool> released{false};
  std::atomic<bool> timed_out{false};
  static void CUDART_CB hold(void* self) {
    auto* gate = static_cast<Gate*>(self);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!gate->released.load()) {
      if (std::chrono::steady_clock::now() > until) {
        gate->timed_out = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
};

class CudaStreamGpuTest : public ::testing::TestWithParam<GraphCaseParam> {};

TEST_P(CudaStreamGpuTest, RunsBehindTheCallersQueuedWorkWithoutWaitingForIt) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const GraphCaseParam& p = GetParam();
  const LayerCase lc = p.layer();
  DecodeBatch batch(lc, p.num_reqs, p.pad, p.q_len, /*max_blocks=*/16, std::random_device{}());
  const std::vector<uint8_t> k_init = batch.random_cache();
  const std::vector<uint8_t> v_init =
      batch.has_value_cache() ? batch.random_cache() : std::vector<uint8_t>{};
  Engine engine(batch, k_init, v_init);
  const int T = batch.tokens();
  const CommonAttentionMetadata common = batch.common();
  const std::vector<uint8_t> q_host = batch.random_rows(T, batch.q_width());
  const std::vector<uint8_t> k_host = batch.random_rows(T, batch.k_width());
  const std::vector<uint8_t> v_host =
      batch.has_value_cache() ? batch.random_rows(T, batch.v_width()) : std::vector<uint8_t>{};
  DeviceArray q(q_host.size()), key(k_host.size()), value(std::max<size_t>(v_host.size(), 16));
  cudaMemset(q.ptr, 0xff, q.bytes);  // NaN until the queued copy has run
  PinnedBytes q_pinned(q_host.size());
  std::memcpy(q_pinned.ptr, q_host.data(), q_host.size());
  cudaMemcpy(key.ptr, k_host.data(), k_host.size(), cudaMemcpyHostToDevice);
  if (!v_host.empty()) cudaMemcpy(value.ptr, v_host.data(), v_host.size(), cudaMemcpyHostToDevice);
  check(cudaDeviceSynchronize(), "setup");

  Stream stream;
  Gate gate;
  // The caller's work queued first: the stream is held, then the real queries arrive.
  check(cudaLaunchHostFunc(stream.s, Gate::hold, &gate), "hold");
  check(cudaMemcpyAsync(q.ptr, q_pinned.ptr, q_host.size(), cudaMemcpyHostToDevice, stream.s),
        "queued q");
  const ExecutionContext ctx{stream.s};
  const AttentionMetadata& meta = engine.builder->build(common, ctx);
  engine.impl->forward(batch.q_view(q.ptr, DeviceType::kCuda),
                       batch.k_view(key.ptr, DeviceType::kCuda),
                       batch.v_view(value.ptr, DeviceType::kCuda), engine.cache(batch), meta,
                       batch.out_view(engine.out.ptr, DeviceType::kCuda), ctx);
  // build() and forward() returned while the stream was still held: they did not wait.
  const bool returned_while_held = !gate.released.load() && !gate.timed_out.load();
  gate.released = true;
  check(cudaStreamSynchronize(stream.s), "stream");
  EXPECT_TRUE(returned_while_held) << lc.backend << ": build()/forward() waited for the stream";
  EXPECT_FALSE(gate.timed_out.load());

  const std::vector<uint8_t> got = engine.out.download();
  const std::vector<uint8_t> want =
      batch.reference(engine.k_cache.download(),
                      batch.has_value_cache() ? engine.v_cache.download() : std::vector<uint8_t>{},
                      q_host, k_host, v_host);
  EXPECT_LT(batch.rel_l2(got, want), tolerance(batch.layer().dtype))
      << lc.backend << ": the kernels ran before the stream's queued copy";
}

INSTANTIATE_TEST_SUITE_P(NonDefaultStream, CudaStreamGpuTest,
                         ::testing::Values(GraphCaseParam{"Flash", flash_case, 5, 0, 1},
                                           GraphCaseParam{"FlashPrefill", flash_case, 2, 0, 33},
                                           GraphCaseParam{"Paged", paged_case, 5, 0, 1},
                                           GraphCaseParam{"Mla", mla_case, 5, 0, 1}),
                         [](const ::testing::TestParamInfo<GraphCaseParam>& param_info) {
                           return param_info.param.name;
                         });

TEST(CudaLimitsGpuTest, AStepBeyondTheReservedLimitsIsRefusedNamingTheBound) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (LayerCase (*make)() : {flash_case, paged_case, mla_case}) {
    const LayerCase lc = make();
    DecodeBatch batch(lc, 4, 0, 1, 8, 7);
    auto builder = batch.backend().make_builder(batch.spec(), batch.layer());
    StepLimits limits = batch.limits();
    limits.max_num_reqs = 3;
    EXPECT_GT(builder->workspace_bytes(limits), 0u);
    builder->reserve(limits);
    try {
      builder->build(batch.common(), {});
      ADD_FAILURE() << lc.backend << ": a step of 4 requests passed max_num_reqs 3";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("max_num_reqs = 3"), std::string::npos) << e.what();
    }
    limits.max_num_reqs = 0;
    try {
      builder->reserve(limits);
      ADD_FAILURE() << lc.backend << ": max_num_reqs 0 was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("max_num_reqs is 0"), std::string::npos) << e.what();
    }
    // A graph-shaped build needs reserve() first.
    auto fresh = batch.backend().make_builder(batch.spec(), batch.layer());
    try {
      fresh->build(batch.common(), ExecutionContext{nullptr, true});
      ADD_FAILURE() << lc.backend << ": a graph-shaped build without reserve() passed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("reserve()"), std::string::npos) << e.what();
    }
  }
}

// Caller-provided workspace: reserve() places the builder's buffers there.
TEST(CudaLimitsGpuTest, CallerProvidedWorkspaceServesSteps) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const LayerCase lc = flash_case();
  DecodeBatch batch(lc, 3, 0, 1, 8, 11);
  const std::vector<uint8_t> k_init = batch.random_cache(), v_init = batch.random_cache();
  Engine engine(batch, k_init, v_init);
  DeviceArray workspace(engine.builder->workspace_bytes(batch.limits()));
  engine.builder->reserve(batch.limits(), workspace.ptr);
  const int T = batch.tokens();
  const std::vector<uint8_t> q_host = batch.random_rows(T, batch.q_width());
  const std::vector<uint8_t> k_host = batch.random_rows(T, batch.k_width());
  const std::vector<uint8_t> v_host = batch.random_rows(T, batch.v_width());
  DeviceArray q(q_host.size()), key(k_host.size()), value(v_host.size());
  cudaMemcpy(q.ptr, q_host.data(), q_host.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(key.ptr, k_host.data(), k_host.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(value.ptr, v_host.data(), v_host.size(), cudaMemcpyHostToDevice);
  const CommonAttentionMetadata common = batch.common();
  const AttentionMetadata& meta = engine.builder->build(common, {});
  engine.impl->forward(batch.q_view(q.ptr, DeviceType::kCuda),
                       batch.k_view(key.ptr, DeviceType::kCuda),
                       batch.v_view(value.ptr, DeviceType::kCuda), engine.cache(batch), meta,
                       batch.out_view(engine.out.ptr, DeviceType::kCuda));
  check(cudaDeviceSynchronize(), "forward");
  const std::vector<uint8_t> want =
      batch.reference(engine.k_cache.download(), engine.v_cache.download(), q_host, k_host, v_host);
  EXPECT_LT(batch.rel_l2(engine.out.download(), want), tolerance(batch.layer().dtype));
}

}  // namespace
}  // namespace attnkit::testing
#endif  // ATTNKIT_HAS_CUDA
