// The model runner's step loop: schedule, grow block tables, build metadata once per group,
// run every layer's forward over synthetic Q/K/V, verify, advance.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "attnkit/backend/forward_check.h"
#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/kv_cache/common_metadata_builder.h"
#include "attnkit/kv_cache/kv_cache_manager.h"
#include "attnkit/runtime/dense_verifier.h"
#include "runtime/counter_hash.h"
#include "runtime/kv_block_adapter.h"
#include "runtime/runner_impl.h"
#include "runtime/step_rows.h"

namespace attnkit {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Checked mode: names, by request id, every request whose rows of this forward call hold
// NaN/inf (`bad`: what the backend reported, else a scan of the fetched output).
void throw_non_finite(int64_t step, int layer, std::string_view backend,
                      const std::vector<StepRow>& rows, const std::vector<NonFiniteRows>& bad,
                      int num_reqs) {
  std::string list;
  for (const NonFiniteRows& r : bad) {
    const StepRow& first = rows[static_cast<size_t>(r.first_row)];
    list += fmt::format("{}request id {} {} ({} rows, first at position {} head {} dim {})",
                        list.empty() ? "" : "; ", first.request, r.tensor, r.num_rows,
                        first.position, r.head, r.dim);
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("step {}, layer {} ({}): NaN/inf for {} of {} requests of the step: {}",
                          step, layer, backend, count_requests(bad), num_reqs, list));
}

// Output rows to verify: all of them, or `samples` distinct rows picked by a seeded hash
// (a partial Fisher-Yates shuffle), so different steps and layers check different rows.
std::vector<int> rows_to_verify(int num_rows, int samples, uint64_t seed, int64_t step, int layer) {
  std::vector<int> rows(static_cast<size_t>(num_rows));
  std::iota(rows.begin(), rows.end(), 0);
  if (samples <= 0 || samples >= num_rows) return rows;
  for (int i = 0; i < samples; ++i) {
    const uint64_t h = counter_hash({seed, 0x7e51full, static_cast<uint64_t>(step),
                                     static_cast<uint64_t>(layer), static_cast<uint64_t>(i)});
    const int j = i + static_cast<int>(h % static_cast<uint64_t>(num_rows - i));
    std::swap(rows[static_cast<size_t>(i)], rows[static_cast<size_t>(j)]);
  }
  rows.resize(static_cast<size_t>(samples));
  return rows;
}

// Folds every byte of `t` into `h` (8-byte words, the tail zero-padded).
uint64_t fold_bytes(uint64_t h, const HostTensor& t) {
  const auto* bytes = static_cast<const unsigned char*>(t.data());
  const size_t n = t.nbytes();
  for (size_t i = 0; i < n; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes + i, std::min<size_t>(8, n - i));
    h = splitmix64(h ^ word);
  }
  return h;
}

// Keys a query row of `layer` attends over, for the verifier.
QuerySite site_of(const AttentionLayerParams& layer, const StepRow& row) {
  switch (layer.attn_type) {
    case AttentionType::kDecoder:
      return {row.request, row.position, row.position + 1};
    case AttentionType::kEncoderDecoder:
      return {row.request, row.position, row.encoder_len};
    case AttentionType::kEncoder:
    case AttentionType::kEncoderOnly:
      break;
  }
  return {row.request, row.position, row.seq_end};
}

// Encoder lengths fit the model; encoder-only models run each prompt in one pass.
std::vector<RequestSpec> checked_requests(std::span<const RequestSpec> input,
                                          const ModelDescription& model, bool one_pass) {
  std::vector<RequestSpec> requests(input.begin(), input.end());
  for (RequestSpec& r : requests) {
    if (model.is_encoder_decoder) {
      if (r.encoder_len < 1 || r.encoder_len > model.max_encoder_len) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("request {}: encoder length {} must be in 1..{} for {} (an "
                                "encoder-decoder model)",
                                r.id, r.encoder_len, model.max_encoder_len, model.name));
      }
    } else if (r.encoder_len != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("request {}: encoder length {} given, but {} has no encoder (it "
                              "must be 0)",
                              r.id, r.encoder_len, model.name));
    }
    if (one_pass) r.output_len = 1;
  }
  return requests;
}

}  // namespace

// One run of the step loop over a runner's start-up state: its scheduler, block
// accounting, verification statistics and the report it fills.
class ModelRunner::Impl::StepLoop {
 public:
  StepLoop(Impl& runner, const std::vector<RequestSpec>& requests, bool one_pass, RunReport& report)
      : r_(runner),
        report_(report),
        kv_(runner.kv_config, runner.num_blocks),
        blocks_(kv_),
        scheduler_(scheduler_options(runner.options, one_pass), blocks_),
        verifier_(runner.gen),
        group_peak_(runner.groups.size(), 0),
        out_type_(scalar_type_of(runner.dtype)),
        elem_(size_of(out_type_)) {
    progress_.requests_total = report_.requests;
    for (const RequestSpec& request : requests) {
      scheduler_.add_request(request);
      progress_.tokens_total += request.total_computed_tokens();
      report_.generated_tokens += request.output_len;
    }
    for (Impl::Group& g : r_.groups) {
      g.executed.clear();
      g.executed_prefill.clear();
      g.executed_decode.clear();
      g.forward_calls = 0;
    }
  }

  // Steps until every request has finished.
  void run_steps() {
    while (!scheduler_.done()) {
      auto t = Clock::now();
      const SchedulerStep scheduled = scheduler_.schedule();
      if (scheduled.empty()) break;
      const SchedulerStep step = r_.splits_phases ? split_ordered(scheduled) : scheduled;
      collect_rows(step);
      build_group_metadata(step);
      double engine = seconds_since(t);
      record_block_peaks();
      for (Impl::Layer& layer : r_.layers) {
        if (!plans_[static_cast<size_t>(layer.group)].empty()) engine += run_layer(step, layer);
      }
      t = Clock::now();
      scheduler_.finish_step(scheduled);
      engine += seconds_since(t);
      report_progress(step, engine);
    }
    report_.preemptions = scheduler_.num_preemptions();
  }

  // The per-group part of the report, after run_steps().
  void report_groups() {
    for (size_t g = 0; g < r_.groups.size(); ++g) {
      const KvCacheGroup& kg = r_.kv_config.groups[g];
      GroupRunReport gr;
      gr.id = kg.group_id;
      gr.kind = kg.spec.kind;
      gr.spec = kg.spec.describe();
      gr.layers = kg.layer_indices;
      gr.backends_planned = kg.backend_names();
      std::vector<std::string> chosen_by;
      for (const Impl::Layer& layer : r_.layers) {
        if (layer.group != kg.group_id) continue;
        const std::string why(to_string(layer.selection->chosen_by));
        if (std::find(chosen_by.begin(), chosen_by.end(), why) == chosen_by.end()) {
          chosen_by.push_back(why);
        }
      }
      for (const std::string& why : chosen_by)
        gr.chosen_by += (gr.chosen_by.empty() ? "" : "+") + why;
      gr.backends_executed.assign(r_.groups[g].executed.begin(), r_.groups[g].executed.end());
      gr.prefill_backends_executed.assign(r_.groups[g].executed_prefill.begin(),
                                          r_.groups[g].executed_prefill.end());
      gr.decode_backends_executed.assign(r_.groups[g].executed_decode.begin(),
                                         r_.groups[g].executed_decode.end());
      gr.block_size = kg.has_cache() ? kg.cache_block_size() : 0;
      gr.kernel_block_size = kg.kernel_block_size;
      gr.blocks_peak = group_peak_[g];
      gr.blocks_total = report_.blocks_total;
      gr.forward_calls = r_.groups[g].forward_calls;
      report_.groups.push_back(std::move(gr));
    }
  }

  // The verification summary, after run_steps() (when verification is on).
  void report_verification() {
    const VerifyOptions& o = r_.options.verify;
    if (!o.enabled) return;
    VerifyReport v;
    v.tolerance = o.tolerance > 0 ? o.tolerance : default_tolerance(r_.dtype);
    v.max_rel_error = stats_.max_rel_error();
    v.rows_checked = stats_.rows_checked();
    v.passed = v.rows_checked > 0 && v.max_rel_error <= v.tolerance;
    v.samples_per_layer_step = o.samples_per_layer_step;
    for (const auto& [kind, s] : stats_.by_kind()) {
      v.by_kind.push_back({kind, s.max_rel_error, s.rows_checked, s.layer, s.request, s.position});
    }
    report_.verify = std::move(v);
  }

 private:
  // The step with its decode chunks (query length <= kDecodeQueryLen) first, each part in
  // the scheduler's order: the batch order a backend that splits the phases needs
  // (backend/composite_backend.h). The scheduler keeps its own order for finish_step().
  static SchedulerStep split_ordered(const SchedulerStep& step) {
    SchedulerStep out = step;
    std::stable_partition(out.chunks.begin(), out.chunks.end(),
                          [](const ScheduledChunk& c) { return c.num_new <= kDecodeQueryLen; });
    return out;
  }

  // Which backends ran this forward call, in all and per phase (a phase counts when the
  // plan has a request of it).
  static void record_executed(Impl::Group& group, const AttentionImpl& impl,
                              const CommonAttentionMetadata& common) {
    group.executed.insert(std::string(impl.backend_name()));
    bool decode = false, prefill = false;
    for (int i = 0; i < common.num_reqs; ++i) {
      const int32_t len = common.query_start_loc[static_cast<size_t>(i) + 1] -
                          common.query_start_loc[static_cast<size_t>(i)];
      (len <= kDecodeQueryLen ? decode : prefill) = true;
    }
    if (decode) group.executed_decode.insert(std::string(impl.phase_backend_name(Phase::kDecode)));
    if (prefill) {
      group.executed_prefill.insert(std::string(impl.phase_backend_name(Phase::kPrefill)));
    }
  }

  static SchedulerOptions scheduler_options(const RunnerOptions& options, bool one_pass) {
    SchedulerOptions o = options.scheduler;
    if (one_pass) o.chunked_prefill = false;
    return o;
  }

  // Rows of this step (step_rows.h): decoder-side rows, and encoder rows of the requests
  // whose encoder runs this step; token counts for the report.
  void collect_rows(const SchedulerStep& step) {
    dec_rows_.clear();
    enc_rows_.clear();
    dec_rows_.reserve(static_cast<size_t>(step.num_tokens));
    for (const ScheduledChunk& c : step.chunks) {
      const RequestSpec& r = scheduler_.request(c.request_id);
      for (int j = 0; j < c.num_new; ++j) {
        dec_rows_.push_back({r.id, c.num_computed + j, c.num_computed + c.num_new, r.encoder_len});
      }
      if (c.run_encoder) {
        for (int e = 0; e < r.encoder_len; ++e) {
          enc_rows_.push_back({r.id, e, r.encoder_len, r.encoder_len});
        }
        report_.encoder_tokens += r.encoder_len;
      }
      const bool decode = c.num_new == 1 && c.num_computed >= r.prompt_len;
      (decode ? report_.decode_tokens : report_.prefill_tokens) += c.num_new;
    }
    report_.tokens += step.num_tokens;
  }

  // One CommonAttentionMetadata per group, one plan per (group, backend); a group with
  // nothing to run this step has no plans.
  void build_group_metadata(const SchedulerStep& step) {
    const size_t num_groups = r_.groups.size();
    commons_.assign(num_groups, CommonAttentionMetadata{});
    plans_.assign(num_groups, {});
    for (size_t g = 0; g < num_groups; ++g) {
      const KvCacheGroup& kg = r_.kv_config.groups[g];
      const bool cross = kg.spec.kind == KvCacheKind::kCrossAttention;
      std::vector<ScheduledRequest> batch;
      for (const ScheduledChunk& c : step.chunks) {
        const RequestSpec& r = scheduler_.request(c.request_id);
        if (r_.groups[g].encoder_pass) {
          if (c.run_encoder) batch.push_back({0, r.encoder_len, {}, 0, false});
          continue;
        }
        ScheduledRequest s;
        s.num_computed_tokens = c.num_computed;
        s.num_new_tokens = c.num_new;
        if (kg.has_cache()) s.block_table = kv_.block_table(r.id, static_cast<int>(g));
        s.encoder_len = cross ? r.encoder_len : 0;
        s.write_encoder_kv = cross && c.run_encoder;
        batch.push_back(s);
      }
      if (batch.empty()) continue;
      commons_[g] = build_common_metadata(kg, batch);
      for (auto& [name, builder] : r_.groups[g].builders) {
        plans_[g][name] = &builder->build(commons_[g]);
      }
    }
  }

  void record_block_peaks() {
    const std::vector<int> held = blocks_.blocks_per_group();
    for (size_t g = 0; g < r_.groups.size(); ++g) {
      group_peak_[g] = std::max(group_peak_[g], held[g]);
    }
    report_.blocks_peak = std::max(report_.blocks_peak, blocks_.blocks_in_use());
  }

  // Runs one layer's forward over synthetic Q/K/V, checks and verifies its output, and
  // returns the seconds the forward call took.
  double run_layer(const SchedulerStep& step, Impl::Layer& layer) {
    if (layer.params.state) return run_state_layer(step, layer);
    const auto g = static_cast<size_t>(layer.group);
    const AttentionLayerParams& p = layer.params;
    const std::vector<StepRow>& rows = layer.encoder_pass() ? enc_rows_ : dec_rows_;
    const bool cross = p.attn_type == AttentionType::kEncoderDecoder;
    const std::vector<StepRow>& kv_rows = cross ? enc_rows_ : rows;
    const TokenSource qsrc = query_source(p), ksrc = key_source(p);
    const int idx = p.layer_index;
    const auto num_rows = static_cast<int64_t>(rows.size());

    const HostTensor q =
        generate_rows(r_.gen, QkvStream::kQuery, qsrc, idx, rows, p.num_heads, p.head_size);
    HostTensor k, v;
    if (!kv_rows.empty()) {
      k = generate_rows(r_.gen, QkvStream::kKey, ksrc, idx, kv_rows, p.num_kv_heads, p.head_size);
      if (!p.use_mla) {
        v = generate_rows(r_.gen, QkvStream::kValue, ksrc, idx, kv_rows, p.num_kv_heads,
                          p.head_size_v);
      }
    }
    const HostTensor out(out_type_, {num_rows, p.num_heads, p.head_size_v});

    // On a CUDA platform the copies in and out are not attention time; the wait is.
    DeviceIo& device_io = *r_.io;
    const TensorView qd = device_io.stage(q, 0), kd = device_io.stage(k, 1),
                     vd = device_io.stage(v, 2);
    const TensorView od = device_io.scratch(out, 3);
    const AttentionMetadata& plan = *plans_[g].at(std::string(layer.backend->name()));
    std::vector<NonFiniteRows> non_finite;
    const auto t = Clock::now();
    try {
      layer.impl->forward(qd, kd, vd, r_.storage->tensors(idx), plan, od);
    } catch (const NonFiniteOutputError& e) {
      non_finite = e.rows();  // reported below by request id; the output is complete
    }
    device_io.synchronize();
    const double forward_seconds = seconds_since(t);
    device_io.fetch(od, out);
    if (non_finite.empty() && checked_mode(p)) {
      non_finite = find_non_finite_rows(out.view(), plan.common());
    }
    if (!non_finite.empty()) {
      throw_non_finite(step.step, idx, layer.impl->backend_name(), rows, non_finite,
                       plan.common().num_reqs);
    }
    report_.attention_seconds += forward_seconds;
    record_executed(r_.groups[g], *layer.impl, plan.common());
    report_.output_checksum = fold_bytes(report_.output_checksum, out);
    ++r_.groups[g].forward_calls;
    report_.attention_bytes += bytes_moved(step, layer, num_rows, kv_rows.size());
    if (r_.options.verify.enabled) verify_rows(step, layer, rows, out);
    return forward_seconds;
  }

  // A state layer's forward: one input row per new token (input_width() elements from the
  // query stream), one output row; its state stays in the pool's block of each request.
  double run_state_layer(const SchedulerStep& step, Impl::Layer& layer) {
    const auto g = static_cast<size_t>(layer.group);
    const AttentionLayerParams& p = layer.params;
    const StateLayerDims& dims = *p.state;
    const int idx = p.layer_index;
    const auto num_rows = static_cast<int64_t>(dec_rows_.size());
    const HostTensor in(out_type_, {num_rows, dims.input_width()});
    std::vector<float> values(static_cast<size_t>(dims.input_width()));
    for (int64_t i = 0; i < num_rows; ++i) {
      const StepRow& s = dec_rows_[static_cast<size_t>(i)];
      r_.gen.fill_row(QkvStream::kQuery, TokenSource::kDecoder, idx, s.request, s.position, 1,
                      dims.input_width(), values.data());
      for (int c = 0; c < dims.input_width(); ++c) {
        store_from_float(in.data(), out_type_, i * dims.input_width() + c,
                         values[static_cast<size_t>(c)]);
      }
    }
    const HostTensor out(out_type_, {num_rows, dims.output_width()});
    DeviceIo& device_io = *r_.io;
    const TensorView id = device_io.stage(in, 0);
    const TensorView od = device_io.scratch(out, 3);
    const AttentionMetadata& plan = *plans_[g].at(std::string(layer.backend->name()));
    const auto t = Clock::now();
    layer.impl->forward(id, {}, {}, r_.storage->tensors(idx), plan, od);
    device_io.synchronize();
    const double forward_seconds = seconds_since(t);
    device_io.fetch(od, out);
    if (checked_mode(p)) {
      const std::vector<NonFiniteRows> non_finite = find_non_finite_rows(out.view(), plan.common());
      if (!non_finite.empty()) {
        throw_non_finite(step.step, idx, layer.impl->backend_name(), dec_rows_, non_finite,
                         plan.common().num_reqs);
      }
    }
    report_.attention_seconds += forward_seconds;
    record_executed(r_.groups[g], *layer.impl, plan.common());
    report_.output_checksum = fold_bytes(report_.output_checksum, out);
    ++r_.groups[g].forward_calls;
    // Inputs and outputs, and each request's state read and written once.
    report_.attention_bytes +=
        static_cast<double>(num_rows) * (dims.input_width() + dims.output_width()) *
            static_cast<double>(elem_) +
        2.0 * static_cast<double>(dims.bytes()) * static_cast<double>(step.chunks.size());
    if (r_.options.verify.enabled) {
      // The output rows as [rows, 1, width], as read_row() reads them.
      TensorView rows3 = out.view();
      rows3.ndim = 3;
      rows3.shape = {num_rows, 1, dims.output_width()};
      rows3.strides = {dims.output_width(), dims.output_width(), 1};
      for (const int row :
           rows_to_verify(static_cast<int>(num_rows), r_.options.verify.samples_per_layer_step,
                          r_.gen.seed(), step.step, idx)) {
        const StepRow& s = dec_rows_[static_cast<size_t>(row)];
        const double err = row_relative_error(
            read_row(rows3, row), verifier_.expected_state_output(p, s.request, s.position));
        stats_.add(layer.spec.kind, err, idx, {s.request, s.position, s.position + 1});
      }
    }
    return forward_seconds;
  }

  // Bytes one forward call moves: queries, outputs, fresh K/V, and the cached keys it reads.
  double bytes_moved(const SchedulerStep& step, const Impl::Layer& layer, int64_t num_rows,
                     size_t num_kv_rows) const {
    const AttentionLayerParams& p = layer.params;
    const bool cross = p.attn_type == AttentionType::kEncoderDecoder;
    const double kv_token_bytes =
        layer.kv_spec.has_cache() ? static_cast<double>(layer.kv_spec.bytes_per_token())
                                  : static_cast<double>(p.num_kv_heads) *
                                        (p.head_size + p.head_size_v) * static_cast<double>(elem_);
    double bytes = static_cast<double>(num_rows) * p.num_heads * (p.head_size + p.head_size_v) *
                       static_cast<double>(elem_) +
                   static_cast<double>(num_kv_rows) * kv_token_bytes;
    for (const ScheduledChunk& c : step.chunks) {
      const RequestSpec& r = scheduler_.request(c.request_id);
      double keys = 0;
      if (layer.encoder_pass()) {
        keys = c.run_encoder ? r.encoder_len : 0;
      } else if (cross) {
        keys = r.encoder_len;
      } else if (layer.kv_spec.has_cache()) {
        keys = c.num_computed + c.num_new - first_needed_position(layer.kv_spec, c.num_computed);
      } else {
        keys = c.num_new;
      }
      bytes += keys * kv_token_bytes;
    }
    return bytes;
  }

  // Compares the sampled output rows with the dense verifier's.
  void verify_rows(const SchedulerStep& step, const Impl::Layer& layer,
                   const std::vector<StepRow>& rows, const HostTensor& out) {
    const AttentionLayerParams& p = layer.params;
    const int idx = p.layer_index;
    for (const int row :
         rows_to_verify(static_cast<int>(rows.size()), r_.options.verify.samples_per_layer_step,
                        r_.gen.seed(), step.step, idx)) {
      const QuerySite site = site_of(p, rows[static_cast<size_t>(row)]);
      const double err =
          row_relative_error(read_row(out.view(), row), verifier_.expected_output(p, site));
      stats_.add(layer.spec.kind, err, idx, site);
    }
  }

  void report_progress(const SchedulerStep& step, double engine_seconds) {
    report_.engine_seconds += engine_seconds;
    ++report_.steps;
    progress_.step = step.step;
    progress_.steps_run = report_.steps;
    progress_.requests_finished = scheduler_.num_finished();
    progress_.tokens_done = report_.tokens;
    if (r_.options.on_step) r_.options.on_step(progress_);
  }

  Impl& r_;
  RunReport& report_;
  KvCacheManager kv_;
  ManagerBlockAllocator blocks_;
  Scheduler scheduler_;
  StepProgress progress_;
  const DenseVerifier verifier_;
  VerificationStats stats_;
  std::vector<int> group_peak_;
  const ScalarType out_type_;
  const size_t elem_;
  // This step's rows and per-group metadata (collect_rows, build_group_metadata).
  std::vector<StepRow> dec_rows_, enc_rows_;
  std::vector<CommonAttentionMetadata> commons_;
  std::vector<std::map<std::string, const AttentionMetadata*>> plans_;
};

RunReport ModelRunner::Impl::run(std::span<const RequestSpec> input) {
  const auto wall_start = Clock::now();
  const bool one_pass = encoder_only();
  const std::vector<RequestSpec> requests = checked_requests(input, model, one_pass);

  RunReport report;
  report.model = model.name;
  report.platform = platform.to_string();
  report.dtype = std::string(to_string(dtype));
  report.kv_cache_dtype = std::string(to_string(options.kv_cache_dtype));
  report.notes = notes;
  report.warnings = warnings;
  if (one_pass) {
    report.notes.emplace_back(
        "encoder-only model: each prompt runs in one pass without a KV "
        "cache (output length taken as 1)");
  }
  report.requests = static_cast<int>(requests.size());
  report.blocks_total = num_blocks - 1;
  report.kv_cache_bytes = storage->total_bytes();
  report.num_attention_layers = static_cast<int>(layers.size());

  StepLoop loop(*this, requests, one_pass, report);
  loop.run_steps();
  report.wall_seconds = seconds_since(wall_start);
  report.tokens_per_s =
      report.engine_seconds > 0 ? static_cast<double>(report.tokens) / report.engine_seconds : 0.0;
  report.attention_gb_per_s =
      report.attention_seconds > 0 ? report.attention_bytes / report.attention_seconds / 1e9 : 0.0;
  loop.report_groups();
  loop.report_verification();
  return report;
}

}  // namespace attnkit
