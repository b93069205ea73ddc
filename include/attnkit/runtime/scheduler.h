#pragma once
// The request scheduler: continuous batching with chunked prefill (vLLM V1's policy).
//
// Each step has a token budget (max_batch_tokens) and a request limit (max_num_seqs).
// Running requests come first, in admission order: each gets the tokens it still has to
// compute, up to what is left of the budget (a decode is one token; a long prompt is cut
// into chunks). Then waiting requests whose arrival step has come are admitted in order
// while budget and blocks last. Decodes and prefill chunks thus share a step.
//
// Blocks come from a KvBlockAllocator. When a running request cannot get the blocks for
// its next tokens, the most recently admitted running request is preempted: all its
// blocks are freed and it goes back to the front of the waiting queue, to be recomputed
// from its first token (prompt and the tokens it already generated) when re-admitted.
// A request that cannot fit even alone is an Error(kOutOfMemory) naming the sizes.
// After each step, windowed groups release blocks no future query can see, and finished
// requests free everything.

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "attnkit/export.h"
#include "attnkit/runtime/request.h"

namespace attnkit {

// What the scheduler needs from the KV cache. Implemented over the block pool and the
// per-request block tables (runtime/kv_cache_manager.h); tests use their own.
class ATTNKIT_API KvBlockAllocator {
 public:
  virtual ~KvBlockAllocator() = default;
  // Makes room in every KV-cache group for tokens [0, num_computed + num_new) of
  // `request` (blocks it already holds are kept; windowed groups need blocks only for
  // tokens still visible). On a request's first allocation after admission
  // (num_computed == 0) cross-attention groups also get blocks for its encoder_len
  // tokens. All or nothing: returns false and changes nothing when blocks run out.
  virtual bool allocate(const RequestSpec& request, int num_computed, int num_new) = 0;
  // After a step: releases blocks of `request` that no query at a position
  // >= num_computed can see (sliding-window and chunked-local groups).
  virtual void release_invisible(const RequestSpec& request, int num_computed) = 0;
  // Frees every block of `request` (finished or preempted).
  virtual void free(const RequestSpec& request) = 0;
  // Blocks that can ever be handed out (for error messages).
  virtual int num_usable_blocks() const = 0;
  // The fewest blocks `request` holds at once even alone (KvCacheManager::
  // min_blocks_alone); more than num_usable_blocks() means it can never run, and
  // add_request refuses it. 0 when the allocator cannot tell.
  virtual int min_blocks_alone(const RequestSpec& /*request*/) const { return 0; }
};

struct ATTNKIT_API SchedulerOptions {
  int max_batch_tokens = 512;  // token budget of one step (> 0)
  int max_num_seqs = 64;       // requests in one step (> 0)
  // Encoder-only models: a request's whole prompt runs in one pass (bidirectional
  // attention needs every token at once), so it is never chunked.
  bool chunked_prefill = true;
};

// One request's share of a step.
struct ATTNKIT_API ScheduledChunk {
  int request_id = 0;
  int num_computed = 0;  // position of the first new token (tokens before it are cached)
  int num_new = 0;       // new tokens this step: positions num_computed .. +num_new-1
  // True on the first chunk after (re-)admission of an encoder-decoder request: the
  // encoder runs over its encoder_len tokens and cross attention caches their K/V.
  bool run_encoder = false;
};

struct ATTNKIT_API SchedulerStep {
  int64_t step = 0;
  // Running requests first (decodes and continuing prefills), then newly admitted ones.
  std::vector<ScheduledChunk> chunks;
  // Requests preempted while this step was scheduled (their blocks are already free).
  std::vector<int> preempted;
  int num_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class ATTNKIT_API Scheduler {
 public:
  // `allocator` must outlive the scheduler. Throws Error(kInvalidArgument) for bad options.
  Scheduler(SchedulerOptions options, KvBlockAllocator& allocator);

  // Queues a request (ids must be unique). Throws Error(kInvalidArgument) naming a bad
  // field, and for a prompt that cannot fit one step when chunked prefill is off.
  void add_request(const RequestSpec& request);

  // Schedules the next step. When nothing has arrived yet, jumps ahead to the next
  // arrival. Returns an empty step only when every request has finished.
  SchedulerStep schedule();
  // Records that `step` ran: advances each request, generates a token for every request
  // whose known tokens are all computed, frees finished requests and releases
  // out-of-window blocks of the others.
  void finish_step(const SchedulerStep& step);

  bool done() const;
  const RequestSpec& request(int id) const;
  // Tokens of request `id` computed so far (its cached prefix).
  int num_computed(int id) const;
  int num_generated(int id) const;
  int num_preemptions() const { return num_preemptions_; }
  int num_finished() const { return num_finished_; }
  int64_t current_step() const { return step_; }

 private:
  enum class Status { kWaiting, kRunning, kFinished };
  struct State {
    RequestSpec spec;
    Status status = Status::kWaiting;
    int num_computed = 0;
    int num_generated = 0;
    // Tokens whose K/V must be computed before the next token can be sampled: the prompt
    // plus every generated token but the newest one's successor.
    int num_known() const { return spec.prompt_len + num_generated; }
  };

  State& state(int id);
  const State& state(int id) const;
  // Frees the blocks of running request `id` and puts it back at the front of the queue.
  void preempt(int id, SchedulerStep& out);
  [[noreturn]] void throw_cannot_fit(const State& s, int num_new) const;

  SchedulerOptions options_;
  KvBlockAllocator& allocator_;
  std::unordered_map<int, State> states_;  // by request id
  std::deque<int> waiting_;                // request ids, front first
  std::vector<int> running_;               // request ids in admission order
  int64_t step_ = 0;
  int num_preemptions_ = 0;
  int num_finished_ = 0;
};

}  // namespace attnkit
