#pragma once
// The one metadata upload of the CUDA backends' builders: once per step, every array the
// kernels read is packed into host staging (host_staging.h) and sent to the device in ONE
// host->device copy, into grow-only device buffers kept from step to step (so a step that
// is not the largest yet allocates nothing). Device layout:
//
//   metadata buffer (each section 16-byte aligned, in this order):
//     query_start_loc int32[B+1] | seq_lens int32[B] | block_table int32[B * max_blocks]
//     | slot_mapping int64[T] | small items | large items | combine items
//     | split counters uint32[num_split_counters] (zeros; the kernels that merge splits in
//       place count finished splits there and leave them zero)
//   workspace buffer: partial_o fp32[partial_o_floats] | partial_lse fp32[slots, num_heads]

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnkit/core/device_memory.h"
#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/device_plan.h"
#include "kernels/cuda/host_staging.h"

namespace attnkit::cuda {

// The host arrays of one step (CommonAttentionMetadata's layout).
struct StepTables {
  const std::vector<int32_t>& query_start_loc;
  const std::vector<int32_t>& seq_lens;
  const std::vector<int32_t>& block_table;
  const std::vector<int64_t>& slot_mapping;
};

// Device pointers of one uploaded step; valid until the next upload().
struct UploadedStep {
  const int32_t* query_start_loc = nullptr;
  const int32_t* seq_lens = nullptr;
  const int32_t* block_table = nullptr;   // nullptr when the step has no block table
  const int64_t* slot_mapping = nullptr;  // nullptr when the step writes no cache row
  DevicePlan device;
};

class PlanUpload {
 public:
  // Memory of the device current when the builder is made (the CUDA runtime's).
  PlanUpload();

  // Uploads `tables` and `plan`, with num_split_counters zeroed counters, and sizes the
  // workspace for partial_o_floats fp32 partial outputs and the plan's partial lse rows
  // (num_partial_slots * num_heads).
  UploadedStep upload(const StepTables& tables, const CudaPlan& plan, int num_heads,
                      size_t num_split_counters, size_t partial_o_floats);

 private:
  std::unique_ptr<DeviceMemory> memory_;
  HostStaging staging_;
  DeviceBuffer metadata_;
  DeviceBuffer workspace_;
};

}  // namespace attnkit::cuda
