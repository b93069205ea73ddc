#include "kernels/cuda/plan_upload.h"

#include "attnkit/core/error.h"

namespace attnkit::cuda {
namespace {

// Grows `buffer` to at least `bytes`, by half again, so that slowly growing batches do not
// reallocate every step.
void grow(DeviceBuffer& buffer, size_t bytes) {
  if (buffer.data() == nullptr || bytes > buffer.size()) buffer.reserve(bytes + bytes / 2);
}

}  // namespace

PlanUpload::PlanUpload() : memory_(make_current_cuda_memory()) {
  metadata_ = DeviceBuffer(*memory_);
  workspace_ = DeviceBuffer(*memory_);
}

UploadedStep PlanUpload::upload(const StepTables& tables, const CudaPlan& plan, int num_heads,
                                size_t num_split_counters, size_t partial_o_floats) {
  staging_.clear();
  const size_t o_qsl = staging_.append(tables.query_start_loc);
  const size_t o_sl = staging_.append(tables.seq_lens);
  const size_t o_bt = staging_.append(tables.block_table);
  const size_t o_sm = staging_.append(tables.slot_mapping);
  const size_t o_small = staging_.append(plan.small_items);
  const size_t o_large = staging_.append(plan.large_items);
  const size_t o_comb = staging_.append(plan.combine_items);
  const size_t o_cnt = staging_.append(std::vector<uint32_t>(num_split_counters, 0));
  grow(metadata_, staging_.size());
  memory_->copy_to_device(metadata_.data(), staging_.data(), staging_.size());

  const char* base = static_cast<const char*>(metadata_.data());
  UploadedStep step;
  step.query_start_loc = reinterpret_cast<const int32_t*>(base + o_qsl);
  step.seq_lens = reinterpret_cast<const int32_t*>(base + o_sl);
  step.block_table =
      tables.block_table.empty() ? nullptr : reinterpret_cast<const int32_t*>(base + o_bt);
  step.slot_mapping =
      tables.slot_mapping.empty() ? nullptr : reinterpret_cast<const int64_t*>(base + o_sm);

  const size_t o_bytes = partial_o_floats * sizeof(float);
  const size_t lse_bytes =
      static_cast<size_t>(plan.num_partial_slots) * static_cast<size_t>(num_heads) * sizeof(float);
  grow(workspace_, o_bytes + lse_bytes + 16);
  char* work = static_cast<char*>(workspace_.data());

  DevicePlan& dev = step.device;
  dev.small_items = reinterpret_cast<const CudaWorkItem*>(base + o_small);
  dev.num_small = static_cast<int>(plan.small_items.size());
  dev.large_items = reinterpret_cast<const CudaWorkItem*>(base + o_large);
  dev.num_large = static_cast<int>(plan.large_items.size());
  dev.combine_items = reinterpret_cast<const CudaCombineItem*>(base + o_comb);
  dev.num_combine = static_cast<int>(plan.combine_items.size());
  dev.split_counters = num_split_counters == 0 ? nullptr
                                               : reinterpret_cast<unsigned*>(metadata_.data()) +
                                                     o_cnt / sizeof(unsigned);
  dev.partial_o = reinterpret_cast<float*>(work);
  dev.partial_lse = reinterpret_cast<float*>(work + o_bytes);
  return step;
}

}  // namespace attnkit::cuda
