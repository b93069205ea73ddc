#pragma once
// Small end-to-end runs for the runtime tests: a real model config, reduced to a few
// layers and short windows so that every feature is exercised in well under a second.

#include <string>
#include <vector>

#include "attnkit/model/model_loader.h"
#include "attnkit/runtime/model_runner.h"
#include "attnkit/selector/selector.h"

namespace attnkit::testing {

struct SmallRun {
  std::string model = "gemma-3-1b-it";
  std::string attention_config;  // JSON, empty = automatic selection
  DType dtype = DType::kFloat32;
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;
  int layers_per_kind = 1;
  int window_cap = 16;
  int requests = 4;
  int min_prompt = 6, max_prompt = 40;
  int output_len = 5;
  int min_encoder = 10, max_encoder = 30;  // encoder-decoder models only
  int max_batch_tokens = 48;
  int num_blocks = 0;      // 0 = plenty
  int block_size = 0;      // 0 = the backends' choice
  int verify_samples = 0;  // 0 = every row
  uint64_t seed = 1;
};

inline RunReport run_small(const SmallRun& s) {
  const ModelDescription model =
      load_model(std::string(ATTNKIT_MODELS_DIR) + "/" + s.model + ".json");
  const Selector selector(s.attention_config.empty() ? AttentionConfig{}
                                                     : parse_attention_config(s.attention_config));
  RunnerOptions o;
  o.dtype = s.dtype;
  o.kv_cache_dtype = s.kv_cache_dtype;
  o.max_layers_per_kind = s.layers_per_kind;
  o.window_cap = s.window_cap;
  o.num_blocks = s.num_blocks;
  o.kv_cache_memory = size_t{64} << 20;
  if (s.block_size > 0) o.block_size = s.block_size;
  o.scheduler.max_batch_tokens = s.max_batch_tokens;
  o.seed = s.seed;
  o.verify.enabled = true;
  o.verify.samples_per_layer_step = s.verify_samples;
  ModelRunner runner(model, cpu_platform(), selector, o);
  WorkloadOptions w{.num_requests = s.requests,
                    .min_prompt_len = s.min_prompt,
                    .max_prompt_len = s.max_prompt,
                    .output_len = s.output_len,
                    .seed = s.seed};
  if (runner.is_encoder_decoder()) {
    w.min_encoder_len = s.min_encoder;
    w.max_encoder_len = s.max_encoder;
  }
  return runner.run(make_workload(w));
}

inline const GroupRunReport* group_of_kind(const RunReport& r, KvCacheKind kind) {
  for (const GroupRunReport& g : r.groups) {
    if (g.kind == kind) return &g;
  }
  return nullptr;
}

}  // namespace attnkit::testing
