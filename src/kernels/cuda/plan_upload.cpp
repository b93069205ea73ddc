#include "kernels/cuda/plan_upload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"

#if ATTNKIT_HAS_CUDA
#include "kernels/cuda/cuda_check.h"
#endif

namespace attnkit::cuda {
namespace {

constexpr size_t kPartAlign = 256;

size_t align_up(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

// Bytes of HostStaging sections of these sizes (each 16-byte aligned, as append() packs).
size_t staged_bytes(std::initializer_list<size_t> sections) {
  size_t total = 0;
  for (size_t bytes : sections) total = align_up(total, 16) + bytes;
  return total;
}

// Grows `buffer` to at least `bytes`, by half again, so that slowly growing batches do not
// reallocate every step.
void grow(DeviceBuffer& buffer, size_t bytes) {
  if (buffer.data() == nullptr || bytes > buffer.size()) buffer.reserve(bytes + bytes / 2);
}

#if ATTNKIT_HAS_CUDA
cudaEvent_t as_event(void* event) { return static_cast<cudaEvent_t>(event); }
#endif

}  // namespace

size_t UploadCapacity::total_bytes() const {
  return align_up(metadata_bytes, kPartAlign) + align_up(workspace_bytes, kPartAlign);
}

UploadCapacity upload_capacity(const PlanBounds& bounds, const StepLimits& limits, size_t slot_rows,
                               int num_heads, int num_kv_heads, int head_size_v) {
  const size_t reqs = static_cast<size_t>(std::max(limits.max_num_reqs, 0));
  const size_t table = reqs * static_cast<size_t>(std::max(limits.max_blocks_per_req, 0));
  UploadCapacity capacity;
  capacity.metadata_bytes =
      staged_bytes({(reqs + 1) * sizeof(int32_t), reqs * sizeof(int32_t), table * sizeof(int32_t),
                    slot_rows * sizeof(int64_t), bounds.items * sizeof(CudaWorkItem), 0,
                    bounds.combine_items * sizeof(CudaCombineItem),
                    bounds.split_groups * static_cast<size_t>(num_kv_heads) * sizeof(uint32_t)});
  const size_t heads = static_cast<size_t>(num_heads);
  capacity.workspace_bytes =
      bounds.partial_slots * heads * static_cast<size_t>(head_size_v) * sizeof(float) +
      bounds.partial_slots * heads * sizeof(float) + 16;
  return capacity;
}

PlanUpload::PlanUpload() : memory_(make_current_cuda_memory()) {
  for (DeviceBuffer& half : pinned_) half = DeviceBuffer(*memory_, MemoryKind::kPinnedHost);
  metadata_grow_ = DeviceBuffer(*memory_);
  workspace_grow_ = DeviceBuffer(*memory_);
  owned_ = DeviceBuffer(*memory_);
#if ATTNKIT_HAS_CUDA
  for (void*& event : copied_) {
    cudaEvent_t e = nullptr;
    ATTNKIT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    event = e;
  }
#endif
}

PlanUpload::~PlanUpload() {
#if ATTNKIT_HAS_CUDA
  for (void* event : copied_) {
    if (event == nullptr) continue;
    // The staging is freed with this object: its copies must have run.
    cudaEventSynchronize(as_event(event));
    cudaEventDestroy(as_event(event));
  }
#endif
}

void PlanUpload::reserve(const UploadCapacity& capacity, void* external) {
  capacity_ = capacity;
  char* base = static_cast<char*>(external);
  if (base == nullptr) {
    owned_.reserve(capacity.total_bytes());
    base = static_cast<char*>(owned_.data());
  }
  metadata_ = base;
  workspace_ = base + align_up(capacity.metadata_bytes, kPartAlign);
  for (DeviceBuffer& half : pinned_) half.reserve(capacity.metadata_bytes);
  reserved_ = true;
}

void PlanUpload::ensure_staging(size_t bytes) {
  DeviceBuffer& half = pinned_[next_half_];
#if ATTNKIT_HAS_CUDA
  // The copy that last read this half must have run before it is refilled (or freed).
  ATTNKIT_CUDA_CHECK(cudaEventSynchronize(as_event(copied_[next_half_])));
#endif
  if (half.data() == nullptr || bytes > half.size()) {
    if (reserved_) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("the step's metadata needs {} bytes of staging, beyond the {} "
                              "reserved",
                              bytes, half.size()));
    }
    half.reserve(bytes + bytes / 2);
  }
}

void PlanUpload::ensure_device(size_t metadata_bytes, size_t workspace_bytes) {
  if (reserved_) {
    if (metadata_bytes > capacity_.metadata_bytes || workspace_bytes > capacity_.workspace_bytes) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("the step needs {} metadata and {} workspace bytes, beyond the "
                              "{} and {} reserved for its StepLimits",
                              metadata_bytes, workspace_bytes, capacity_.metadata_bytes,
                              capacity_.workspace_bytes));
    }
    return;
  }
  grow(metadata_grow_, metadata_bytes);
  grow(workspace_grow_, workspace_bytes);
  metadata_ = static_cast<char*>(metadata_grow_.data());
  workspace_ = static_cast<char*>(workspace_grow_.data());
}

UploadedStep PlanUpload::upload(const StepTables& tables, const CudaPlan& plan, int num_heads,
                                size_t num_split_counters, size_t partial_o_floats, void* stream) {
  staging_.clear();
  const size_t o_qsl = staging_.append(tables.query_start_loc);
  const size_t o_sl = staging_.append(tables.seq_lens);
  const size_t o_bt = staging_.append(tables.block_table);
  const size_t o_sm = staging_.append(tables.slot_mapping);
  const size_t o_small = staging_.append(plan.small_items);
  const size_t o_large = staging_.append(plan.large_items);
  const size_t o_comb = staging_.append(plan.combine_items);
  const size_t o_cnt = staging_.append_zeros<uint32_t>(num_split_counters);

  const size_t o_bytes = partial_o_floats * sizeof(float);
  const size_t lse_bytes =
      static_cast<size_t>(plan.num_partial_slots) * static_cast<size_t>(num_heads) * sizeof(float);
  ensure_device(staging_.size(), o_bytes + lse_bytes + 16);
  ensure_staging(staging_.size());

  // Host staging -> this half of the pinned staging -> the device, on the step's stream.
  DeviceBuffer& half = pinned_[next_half_];
  if (staging_.size() > 0) std::memcpy(half.data(), staging_.data(), staging_.size());
  memory_->copy_to_device_async(metadata_, half.data(), staging_.size(), stream);
#if ATTNKIT_HAS_CUDA
  ATTNKIT_CUDA_CHECK(
      cudaEventRecord(as_event(copied_[next_half_]), static_cast<cudaStream_t>(stream)));
#endif
  next_half_ ^= 1;

  const char* base = metadata_;
  UploadedStep step;
  step.query_start_loc = reinterpret_cast<const int32_t*>(base + o_qsl);
  step.seq_lens = reinterpret_cast<const int32_t*>(base + o_sl);
  step.block_table =
      tables.block_table.empty() ? nullptr : reinterpret_cast<const int32_t*>(base + o_bt);
  step.slot_mapping =
      tables.slot_mapping.empty() ? nullptr : reinterpret_cast<const int64_t*>(base + o_sm);

  DevicePlan& dev = step.device;
  dev.small_items = reinterpret_cast<const CudaWorkItem*>(base + o_small);
  dev.num_small = static_cast<int>(plan.small_items.size());
  dev.large_items = reinterpret_cast<const CudaWorkItem*>(base + o_large);
  dev.num_large = static_cast<int>(plan.large_items.size());
  dev.combine_items = reinterpret_cast<const CudaCombineItem*>(base + o_comb);
  dev.num_combine = static_cast<int>(plan.combine_items.size());
  dev.split_counters =
      num_split_counters == 0 ? nullptr : reinterpret_cast<unsigned*>(metadata_ + o_cnt);
  dev.partial_o = reinterpret_cast<float*>(workspace_);
  dev.partial_lse = reinterpret_cast<float*>(workspace_ + o_bytes);
  dev.stream = stream;
  return step;
}

}  // namespace attnkit::cuda
