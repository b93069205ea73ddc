// The model runner's step loop: schedule, grow block tables, build metadata once per group,
// run every layer's forward over synthetic Q/K/V, verify, advance.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "attnkit/backend/forward_check.h"
#include "attnkit/core/error.h"
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
void throw_non_finite(int step, int layer, std::string_view backend,
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
std::vector<int> rows_to_verify(int num_rows, int samples, uint64_t seed, int step, int layer) {
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

}  // namespace

RunReport ModelRunner::Impl::run(std::span<const RequestSpec> input) {
  const auto wall_start = Clock::now();
  const bool one_pass = encoder_only();
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

  RunReport report;
  report.model = model.name;
  report.platform = platform.to_string();
  report.dtype = std::string(to_string(dtype));
  report.kv_cache_dtype = std::string(to_string(options.kv_cache_dtype));
  report.notes = notes;
  if (one_pass) {
    report.notes.push_back(
        "encoder-only model: each prompt runs in one pass without a KV "
        "cache (output length taken as 1)");
  }
  report.requests = static_cast<int>(requests.size());
  report.blocks_total = num_blocks - 1;
  report.kv_cache_bytes = storage->total_bytes();
  report.num_attention_layers = static_cast<int>(layers.size());

  KvCacheManager kv(kv_config, num_blocks);
  ManagerBlockAllocator blocks(kv);
  SchedulerOptions scheduler_options = options.scheduler;
  if (one_pass) scheduler_options.chunked_prefill = false;
  Scheduler scheduler(scheduler_options, blocks);
  StepProgress progress;
  progress.requests_total = report.requests;
  for (const RequestSpec& r : requests) {
    scheduler.add_request(r);
    progress.tokens_total += r.total_computed_tokens();
    report.generated_tokens += r.output_len;
  }
  for (Group& g : groups) {
    g.executed.clear();
    g.forward_calls = 0;
  }

  const DenseVerifier verifier(gen);
  VerificationStats stats;
  std::vector<int> group_peak(groups.size(), 0);
  const ScalarType out_type = scalar_type_of(dtype);
  const size_t elem = size_of(out_type);

  while (!scheduler.done()) {
    auto t = Clock::now();
    const SchedulerStep step = scheduler.schedule();
    if (step.empty()) break;
    // Rows of this step (step_rows.h) and the per-group batches.
    std::vector<StepRow> dec_rows, enc_rows;
    dec_rows.reserve(static_cast<size_t>(step.num_tokens));
    for (const ScheduledChunk& c : step.chunks) {
      const RequestSpec& r = scheduler.request(c.request_id);
      for (int j = 0; j < c.num_new; ++j) {
        dec_rows.push_back({r.id, c.num_computed + j, c.num_computed + c.num_new, r.encoder_len});
      }
      if (c.run_encoder) {
        for (int e = 0; e < r.encoder_len; ++e) {
          enc_rows.push_back({r.id, e, r.encoder_len, r.encoder_len});
        }
        report.encoder_tokens += r.encoder_len;
      }
      const bool decode = c.num_new == 1 && c.num_computed >= r.prompt_len;
      (decode ? report.decode_tokens : report.prefill_tokens) += c.num_new;
    }
    report.tokens += step.num_tokens;

    // One CommonAttentionMetadata per group, one plan per (group, backend).
    std::vector<CommonAttentionMetadata> commons(groups.size());
    std::vector<std::map<std::string, const AttentionMetadata*>> plans(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      const KvCacheGroup& kg = kv_config.groups[g];
      const bool cross = kg.spec.kind == KvCacheKind::kCrossAttention;
      std::vector<ScheduledRequest> batch;
      for (const ScheduledChunk& c : step.chunks) {
        const RequestSpec& r = scheduler.request(c.request_id);
        if (groups[g].encoder_pass) {
          if (c.run_encoder) batch.push_back({0, r.encoder_len, {}, 0, false});
          continue;
        }
        ScheduledRequest s;
        s.num_computed_tokens = c.num_computed;
        s.num_new_tokens = c.num_new;
        if (kg.has_cache()) s.block_table = kv.block_table(r.id, static_cast<int>(g));
        s.encoder_len = cross ? r.encoder_len : 0;
        s.write_encoder_kv = cross && c.run_encoder;
        batch.push_back(s);
      }
      if (batch.empty()) continue;
      commons[g] = build_common_metadata(kg, batch);
      for (auto& [name, builder] : groups[g].builders) plans[g][name] = &builder->build(commons[g]);
    }
    double engine = seconds_since(t);

    const std::vector<int> held = blocks.blocks_per_group();
    for (size_t g = 0; g < groups.size(); ++g) group_peak[g] = std::max(group_peak[g], held[g]);
    report.blocks_peak = std::max(report.blocks_peak, blocks.blocks_in_use());

    for (Layer& layer : layers) {
      const auto g = static_cast<size_t>(layer.group);
      if (plans[g].empty()) continue;  // nothing for this group this step
      const AttentionLayerParams& p = layer.params;
      const std::vector<StepRow>& rows = layer.encoder_pass() ? enc_rows : dec_rows;
      const bool cross = p.attn_type == AttentionType::kEncoderDecoder;
      const std::vector<StepRow>& kv_rows = cross ? enc_rows : rows;
      const TokenSource qsrc = query_source(p), ksrc = key_source(p);
      const int idx = p.layer_index;
      const auto num_rows = static_cast<int64_t>(rows.size());

      const HostTensor q =
          generate_rows(gen, QkvStream::kQuery, qsrc, idx, rows, p.num_heads, p.head_size);
      HostTensor k, v;
      if (!kv_rows.empty()) {
        k = generate_rows(gen, QkvStream::kKey, ksrc, idx, kv_rows, p.num_kv_heads, p.head_size);
        if (!p.use_mla) {
          v = generate_rows(gen, QkvStream::kValue, ksrc, idx, kv_rows, p.num_kv_heads,
                            p.head_size_v);
        }
      }
      const HostTensor out(out_type, {num_rows, p.num_heads, p.head_size_v});

      // On a CUDA platform the copies in and out are not attention time; the wait is.
      const TensorView qd = io->stage(q, 0), kd = io->stage(k, 1), vd = io->stage(v, 2);
      const TensorView od = io->scratch(out, 3);
      const AttentionMetadata& plan = *plans[g].at(std::string(layer.backend->name()));
      std::vector<NonFiniteRows> non_finite;
      t = Clock::now();
      try {
        layer.impl->forward(qd, kd, vd, storage->tensors(idx), plan, od);
      } catch (const NonFiniteOutputError& e) {
        non_finite = e.rows();  // reported below by request id; the output is complete
      }
      io->synchronize();
      const double forward_seconds = seconds_since(t);
      io->fetch(od, out);
      if (non_finite.empty() && checked_mode(p)) {
        non_finite = find_non_finite_rows(out.view(), plan.common());
      }
      if (!non_finite.empty()) {
        throw_non_finite(step.step, idx, layer.impl->backend_name(), rows, non_finite,
                         plan.common().num_reqs);
      }
      report.attention_seconds += forward_seconds;
      engine += forward_seconds;
      groups[g].executed.insert(std::string(layer.impl->backend_name()));
      report.output_checksum = fold_bytes(report.output_checksum, out);
      ++groups[g].forward_calls;

      // Bytes the call moves: queries, outputs, fresh K/V, and the cached keys it reads.
      const double kv_token_bytes =
          layer.kv_spec.has_cache()
              ? static_cast<double>(layer.kv_spec.bytes_per_token())
              : static_cast<double>(p.num_kv_heads) * (p.head_size + p.head_size_v) * elem;
      double bytes =
          static_cast<double>(num_rows) * p.num_heads * (p.head_size + p.head_size_v) * elem +
          static_cast<double>(kv_rows.size()) * kv_token_bytes;
      for (const ScheduledChunk& c : step.chunks) {
        const RequestSpec& r = scheduler.request(c.request_id);
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
      report.attention_bytes += bytes;

      if (options.verify.enabled) {
        for (const int row :
             rows_to_verify(static_cast<int>(num_rows), options.verify.samples_per_layer_step,
                            gen.seed(), step.step, idx)) {
          const QuerySite site = site_of(p, rows[static_cast<size_t>(row)]);
          const double err =
              row_relative_error(read_row(out.view(), row), verifier.expected_output(p, site));
          stats.add(layer.spec.kind, err, idx, site);
        }
      }
    }

    t = Clock::now();
    scheduler.finish_step(step);
    engine += seconds_since(t);
    report.engine_seconds += engine;
    ++report.steps;
    progress.step = step.step;
    progress.steps_run = report.steps;
    progress.requests_finished = scheduler.num_finished();
    progress.tokens_done = report.tokens;
    if (options.on_step) options.on_step(progress);
  }

  report.preemptions = scheduler.num_preemptions();
  report.wall_seconds = seconds_since(wall_start);
  report.tokens_per_s = report.engine_seconds > 0 ? report.tokens / report.engine_seconds : 0.0;
  report.attention_gb_per_s =
      report.attention_seconds > 0 ? report.attention_bytes / report.attention_seconds / 1e9 : 0.0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const KvCacheGroup& kg = kv_config.groups[g];
    GroupRunReport gr;
    gr.id = kg.group_id;
    gr.kind = kg.spec.kind;
    gr.spec = kg.spec.describe();
    gr.layers = kg.layer_indices;
    gr.backends_planned = kg.backend_names();
    std::vector<std::string> chosen_by;
    for (const Layer& layer : layers) {
      if (layer.group != kg.group_id) continue;
      const std::string why(to_string(layer.selection->chosen_by));
      if (std::find(chosen_by.begin(), chosen_by.end(), why) == chosen_by.end()) {
        chosen_by.push_back(why);
      }
    }
    for (const std::string& why : chosen_by)
      gr.chosen_by += (gr.chosen_by.empty() ? "" : "+") + why;
    gr.backends_executed.assign(groups[g].executed.begin(), groups[g].executed.end());
    gr.block_size = kg.has_cache() ? kg.cache_block_size() : 0;
    gr.kernel_block_size = kg.kernel_block_size;
    gr.blocks_peak = group_peak[g];
    gr.blocks_total = report.blocks_total;
    gr.forward_calls = groups[g].forward_calls;
    report.groups.push_back(std::move(gr));
  }
  if (options.verify.enabled) {
    VerifyReport v;
    v.tolerance =
        options.verify.tolerance > 0 ? options.verify.tolerance : default_tolerance(dtype);
    v.max_rel_error = stats.max_rel_error();
    v.rows_checked = stats.rows_checked();
    v.passed = v.rows_checked > 0 && v.max_rel_error <= v.tolerance;
    v.samples_per_layer_step = options.verify.samples_per_layer_step;
    for (const auto& [kind, s] : stats.by_kind()) {
      v.by_kind.push_back({kind, s.max_rel_error, s.rows_checked, s.layer, s.request, s.position});
    }
    report.verify = std::move(v);
  }
  return report;
}

}  // namespace attnkit
