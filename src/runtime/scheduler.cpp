#include "attnkit/runtime/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

#include "attnkit/core/error.h"

namespace attnkit {

Scheduler::Scheduler(SchedulerOptions options, KvBlockAllocator& allocator)
    : options_(options), allocator_(allocator) {
  if (options_.max_batch_tokens < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("max batch tokens {} must be at least 1", options_.max_batch_tokens));
  }
  if (options_.max_num_seqs < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("max requests per step {} must be at least 1", options_.max_num_seqs));
  }
}

Scheduler::State& Scheduler::state(int id) {
  const auto it = states_.find(id);
  ATTNKIT_CHECK(it != states_.end(), "unknown request id");
  return it->second;
}

const Scheduler::State& Scheduler::state(int id) const {
  const auto it = states_.find(id);
  if (it == states_.end()) {
    throw Error(ErrorCode::kNotFound, fmt::format("no request with id {}", id));
  }
  return it->second;
}

void Scheduler::add_request(const RequestSpec& r) {
  const auto bad = [&](const std::string& what) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("request {}: {}", r.id, what));
  };
  if (r.id < 0) bad(fmt::format("id {} must not be negative", r.id));
  if (states_.count(r.id) != 0) bad("id is already queued (ids must be unique)");
  if (r.prompt_len < 1) bad(fmt::format("prompt length {} must be at least 1", r.prompt_len));
  if (r.output_len < 1) bad(fmt::format("output length {} must be at least 1", r.output_len));
  if (r.arrival_step < 0) bad(fmt::format("arrival step {} must not be negative", r.arrival_step));
  if (r.encoder_len < 0) bad(fmt::format("encoder length {} must not be negative", r.encoder_len));
  if (int64_t{r.prompt_len} + r.output_len > kMaxRequestTokens) {
    bad(
        fmt::format("prompt length {} + output length {} exceed the {} tokens a request may "
                    "hold",
                    r.prompt_len, r.output_len, kMaxRequestTokens));
  }
  // Refused now rather than after computing its prompt: a request that needs more blocks
  // than the pool has, even alone, can never finish.
  if (const int needed = allocator_.min_blocks_alone(r); needed > allocator_.num_usable_blocks()) {
    throw Error(
        ErrorCode::kOutOfMemory,
        fmt::format("request {} can never fit the KV cache: its {} tokens (prompt {} + output "
                    "{}){} need at least {} blocks across the KV-cache groups but only {} are "
                    "usable (raise --num-blocks or --kv-cache-memory, or shorten requests)",
                    r.id, r.total_computed_tokens(), r.prompt_len, r.output_len,
                    r.encoder_len > 0 ? fmt::format(" and {} encoder tokens", r.encoder_len)
                                      : std::string(),
                    needed, allocator_.num_usable_blocks()));
  }
  if (!options_.chunked_prefill && r.total_computed_tokens() > options_.max_batch_tokens) {
    bad(
        fmt::format("{} tokens must run in one pass but the step budget is {} tokens (raise "
                    "--max-batch-tokens)",
                    r.total_computed_tokens(), options_.max_batch_tokens));
  }
  states_.emplace(r.id, State{r});
  // Keep the queue ordered by arrival (stable for equal steps): first come, first served.
  const auto pos =
      std::upper_bound(waiting_.begin(), waiting_.end(), r.arrival_step,
                       [&](int step, int id) { return step < state(id).spec.arrival_step; });
  waiting_.insert(pos, r.id);
}

bool Scheduler::done() const { return waiting_.empty() && running_.empty(); }

const RequestSpec& Scheduler::request(int id) const { return state(id).spec; }
int Scheduler::num_computed(int id) const { return state(id).num_computed; }
int Scheduler::num_generated(int id) const { return state(id).num_generated; }

void Scheduler::preempt(int id, SchedulerStep& out) {
  State& s = state(id);
  allocator_.free(s.spec);
  s.status = Status::kWaiting;
  s.num_computed = 0;  // recompute from the first token when re-admitted
  running_.erase(std::find(running_.begin(), running_.end(), id));
  waiting_.push_front(id);
  out.preempted.push_back(id);
  ++num_preemptions_;
}

void Scheduler::throw_cannot_fit(const State& s, int num_new) const {
  throw Error(
      ErrorCode::kOutOfMemory,
      fmt::format("the KV cache cannot hold request {} even alone: it needs blocks for "
                  "{} tokens{} in every KV-cache group but only {} blocks are usable "
                  "(raise --num-blocks or --kv-cache-memory, or shorten requests)",
                  s.spec.id, s.num_computed + num_new,
                  s.spec.encoder_len > 0 ? fmt::format(" (+{} encoder tokens)", s.spec.encoder_len)
                                         : std::string(),
                  allocator_.num_usable_blocks()));
}

SchedulerStep Scheduler::schedule() {
  SchedulerStep out;
  if (done()) {
    out.step = step_;
    return out;
  }
  // Idle until the next arrival: jump there instead of running empty steps.
  if (running_.empty() && state(waiting_.front()).spec.arrival_step > step_) {
    step_ = state(waiting_.front()).spec.arrival_step;
  }
  out.step = step_;
  int budget = options_.max_batch_tokens;

  // 1. Running requests, in admission order. A victim of preemption is always the last
  //    running request, which has not been scheduled yet in this step.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    const int id = running_[i];
    State& s = state(id);
    const int remaining = s.num_known() - s.num_computed;
    const int num_new = std::min(remaining, budget);
    if (!options_.chunked_prefill && num_new < remaining) break;
    bool scheduled = false;
    while (!scheduled) {
      scheduled = allocator_.allocate(s.spec, s.num_computed, num_new);
      if (scheduled) break;
      const int victim = running_.back();
      if (victim == id && i == 0) throw_cannot_fit(s, num_new);
      preempt(victim, out);
      if (victim == id) break;
    }
    if (!scheduled) break;  // `id` itself was preempted: it was the last running request
    out.chunks.push_back({id, s.num_computed, num_new, false});
    budget -= num_new;
    ++i;
  }

  // 2. Waiting requests that have arrived, first come first served. Not in a step that
  //    had to preempt: blocks are short, and the victims would only be thrashed.
  while (out.preempted.empty() && budget > 0 && !waiting_.empty() &&
         static_cast<int>(running_.size()) < options_.max_num_seqs) {
    const int id = waiting_.front();
    State& s = state(id);
    if (s.spec.arrival_step > step_) break;
    const int remaining = s.num_known() - s.num_computed;
    const int num_new = std::min(remaining, budget);
    if (!options_.chunked_prefill && num_new < remaining) break;
    if (!allocator_.allocate(s.spec, s.num_computed, num_new)) {
      if (running_.empty()) throw_cannot_fit(s, num_new);
      break;
    }
    waiting_.pop_front();
    s.status = Status::kRunning;
    running_.push_back(id);
    out.chunks.push_back({id, s.num_computed, num_new, s.spec.encoder_len > 0});
    budget -= num_new;
  }
  out.num_tokens = options_.max_batch_tokens - budget;
  return out;
}

void Scheduler::finish_step(const SchedulerStep& step) {
  for (const ScheduledChunk& chunk : step.chunks) {
    State& s = state(chunk.request_id);
    ATTNKIT_CHECK(s.status == Status::kRunning && s.num_computed == chunk.num_computed,
                  "finish_step() got a step that does not match the scheduler's state");
    s.num_computed += chunk.num_new;
    // Every known token is computed: the model samples the next one.
    if (s.num_computed == s.num_known()) ++s.num_generated;
    if (s.num_generated == s.spec.output_len) {
      allocator_.free(s.spec);
      s.status = Status::kFinished;
      running_.erase(std::find(running_.begin(), running_.end(), chunk.request_id));
      ++num_finished_;
    } else {
      allocator_.release_invisible(s.spec, s.num_computed);
    }
  }
  step_ = step.step + 1;
}

}  // namespace attnkit
