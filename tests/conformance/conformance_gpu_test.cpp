// The suite's CUDA path: a backend that declares the CUDA platform gets every tensor in
// CUDA device memory (make_cuda_memory), and its results are read back from there. The
// backend here stages its device tensors to the host and runs REFERENCE, so the test
// checks the suite's plumbing on a real GPU independently of any CUDA kernel.

#include <gtest/gtest.h>

#include <span>
#include <string>

#include "attnkit/conformance/conformance.h"
#include "attnkit/registry/registry.h"

namespace attnkit::conformance {
namespace {

HostTensor to_host(DeviceMemory& memory, const TensorView& t) {
  if (t.empty()) return HostTensor();
  EXPECT_EQ(t.device.type, DeviceType::kCuda);
  EXPECT_TRUE(t.is_contiguous());
  HostTensor h(t.dtype, std::span<const int64_t>(t.shape.data(), static_cast<size_t>(t.ndim)));
  memory.copy_to_host(h.data(), t.data, h.nbytes());
  return h;
}

class StagingImpl final : public AttentionImpl {
 public:
  StagingImpl(std::unique_ptr<AttentionImpl> inner, DeviceMemory& memory)
      : inner_(std::move(inner)), memory_(memory) {}
  std::string_view backend_name() const override { return "STAGED_REFERENCE"; }
  void forward(const TensorView& q, const TensorView& k, const TensorView& v,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& out, const ExecutionContext& /*ctx*/) override {
    HostTensor hq = to_host(memory_, q), hk = to_host(memory_, k), hv = to_host(memory_, v);
    HostTensor hkc = to_host(memory_, cache.key), hvc = to_host(memory_, cache.value);
    HostTensor ho = to_host(memory_, out);
    KvCacheTensors host_cache = cache;
    host_cache.key = hkc.view();
    host_cache.value = hvc.view();
    inner_->forward(hq.view(), hk.view(), hv.view(), host_cache, metadata, ho.view());
    memory_.copy_to_device(out.data, ho.data(), ho.nbytes());
    if (!cache.key.empty()) memory_.copy_to_device(cache.key.data, hkc.data(), hkc.nbytes());
    if (!cache.value.empty()) memory_.copy_to_device(cache.value.data, hvc.data(), hvc.nbytes());
  }

 private:
  std::unique_ptr<AttentionImpl> inner_;
  DeviceMemory& memory_;
};

class StagingBackend final : public AttentionBackend {
 public:
  explicit StagingBackend(DeviceMemory& memory) : memory_(memory) {
    caps_ = reference_->capabilities();
    caps_.platform = PlatformKind::kCuda;
  }
  std::string_view name() const override { return "STAGED_REFERENCE"; }
  std::string_view description() const override { return "REFERENCE behind CUDA memory"; }
  const BackendCapabilities& capabilities() const override { return caps_; }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    return reference_->make_builder(spec, layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return std::make_unique<StagingImpl>(reference_->make_impl(layer), memory_);
  }

 private:
  DeviceMemory& memory_;
  std::shared_ptr<const AttentionBackend> reference_ = global_registry().get("REFERENCE");
  BackendCapabilities caps_;
};

TEST(ConformanceGpu, CudaBackendsRunOnDeviceMemory) {
  if (!local_cuda_platform()) GTEST_SKIP() << "no CUDA device visible to this binary";
  std::unique_ptr<DeviceMemory> memory = make_device_memory(PlatformKind::kCuda);
  EXPECT_EQ(memory->device().type, DeviceType::kCuda);
  StagingBackend backend(*memory);
  const ConformanceReport report = run_conformance(backend);  // default memory: CUDA too
  EXPECT_TRUE(report.ok()) << format_table(report);
  EXPECT_GT(report.count(CaseStatus::kPassed), 20);
  EXPECT_EQ(report.platform.rfind("cuda:", 0), 0u) << report.platform;
}

TEST(ConformanceGpu, CudaMemoryIsRefusedWithoutADevice) {
  if (local_cuda_platform()) GTEST_SKIP() << "a CUDA device is present";
  try {
    make_cuda_memory(0);
    ADD_FAILURE() << "make_cuda_memory succeeded without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
  }
  // A CUDA backend's suite run says why it cannot run here.
  std::unique_ptr<DeviceMemory> host = make_host_memory();
  StagingBackend backend(*host);
  try {
    run_conformance(backend);
    ADD_FAILURE() << "a CUDA backend's suite ran without a device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backend STAGED_REFERENCE runs on CUDA"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace attnkit::conformance
