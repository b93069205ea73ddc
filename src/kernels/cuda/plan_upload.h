#pragma once
// The one metadata upload of the CUDA backends' builders: once per step, every array the
// kernels read is packed into pinned host staging and sent to the device in ONE
// asynchronous host->device copy on the step's stream, into device buffers kept from step
// to step. Device layout:
//
//   metadata buffer (each section 16-byte aligned, in this order):
//     query_start_loc int32[B+1] | seq_lens int32[B] | block_table int32[B * max_blocks]
//     | slot_mapping int64[T] | small items | large items | combine items
//     | split counters uint32[num_split_counters] (zeros; the kernels that merge splits in
//       place count finished splits there and leave them zero)
//   workspace buffer: partial_o fp32[partial_o_floats] | partial_lse fp32[slots, num_heads]
//
// Two modes (core/execution.h):
//   - unreserved: the buffers grow (by half again) whenever a step needs more; the
//     addresses change when they do;
//   - reserved (reserve()): both buffers are allocated once, or placed in the caller's
//     memory, for the largest step; upload() then never allocates, the addresses never
//     change (a captured CUDA graph keeps reading them), and a step that does not fit is
//     refused naming the bound.
// The staging has two pinned halves used in turn; before a half is refilled, upload()
// waits for the copy that last read it (enqueued two uploads before, normally long done),
// never for the stream's other work.

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

// The sizes one reserved upload holds.
struct UploadCapacity {
  size_t metadata_bytes = 0;
  size_t workspace_bytes = 0;
  // Device memory reserve() takes for both (each part 256-byte aligned).
  size_t total_bytes() const;
};

// The capacity for steps within `limits` of a layer with these heads and value width.
// slot_rows: the most cache rows one step writes (the query tokens; for cross attention
// the encoder tokens of every request).
UploadCapacity upload_capacity(const PlanBounds& bounds, const StepLimits& limits, size_t slot_rows,
                               int num_heads, int num_kv_heads, int head_size_v);

class PlanUpload {
 public:
  // Memory of the device current when the builder is made (the CUDA runtime's).
  PlanUpload();
  ~PlanUpload();
  PlanUpload(const PlanUpload&) = delete;
  PlanUpload& operator=(const PlanUpload&) = delete;

  // Allocates the buffers once for `capacity` (or places them in `external`, device
  // memory of at least capacity.total_bytes() that the caller keeps alive), and the
  // pinned staging. Called again, it replaces them.
  void reserve(const UploadCapacity& capacity, void* external);
  bool reserved() const { return reserved_; }

  // Uploads `tables` and `plan` on `stream`, with num_split_counters zeroed counters, and
  // sizes the workspace for partial_o_floats fp32 partial outputs and the plan's partial
  // lse rows (num_partial_slots * num_heads).
  UploadedStep upload(const StepTables& tables, const CudaPlan& plan, int num_heads,
                      size_t num_split_counters, size_t partial_o_floats, void* stream);

 private:
  void ensure_staging(size_t bytes);
  void ensure_device(size_t metadata_bytes, size_t workspace_bytes);

  std::unique_ptr<DeviceMemory> memory_;
  HostStaging staging_;
  DeviceBuffer pinned_[2];
  // cudaEvent_t recorded after each half's copy (unused in a build without CUDA).
  [[maybe_unused]] void* copied_[2] = {nullptr, nullptr};
  int next_half_ = 0;
  bool reserved_ = false;
  UploadCapacity capacity_;
  DeviceBuffer owned_;  // device memory when reserve() got no external memory
  DeviceBuffer metadata_grow_;
  DeviceBuffer workspace_grow_;
  char* metadata_ = nullptr;
  char* workspace_ = nullptr;
};

}  // namespace attnkit::cuda
