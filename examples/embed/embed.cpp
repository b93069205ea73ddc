// A minimal engine loop over attnkit's public API, to copy into an engine:
//   1. read a model config and select a backend for every attention layer;
//   2. plan the paged KV cache those backends shape, allocate it and its block pool;
//   3. one prefill step and a few decode steps: the block pool gives each request its
//      slots, one metadata builder per KV-cache group plans the step, every layer's
//      implementation writes its fresh K/V into the cache and computes attention.
// Queries and keys are random (an engine has its projections here). The program checks
// that every output is finite and exits non-zero otherwise.
//
//   embed [MODEL]    MODEL: a config.json path or an embedded model name (default
//                    gemma-3-1b-it: sliding-window and full-attention groups)

#include <attnkit/backend/backend.h>
#include <attnkit/core/error.h>
#include <attnkit/core/numeric.h>
#include <attnkit/core/platform.h>
#include <attnkit/kv_cache/common_metadata_builder.h>
#include <attnkit/kv_cache/kv_cache_manager.h>
#include <attnkit/kv_cache/kv_cache_storage.h>
#include <attnkit/model/model_loader.h>
#include <attnkit/selector/layer_config.h>
#include <attnkit/selector/selection_report.h>
#include <attnkit/selector/selector.h>
#include <attnkit/selector/startup_plan.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

namespace {

// Random values in [-1, 1] for a [tokens, heads, width] tensor of the compute dtype.
attnkit::HostTensor random_rows(attnkit::ScalarType dtype, int tokens, int heads, int width,
                                std::mt19937& rng) {
  attnkit::HostTensor t(dtype, {tokens, heads, width});
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.view().numel(); ++i)
    attnkit::store_from_float(t.data(), dtype, i, uni(rng));
  return t;
}

}  // namespace

int main(int argc, char** argv) try {
  using namespace attnkit;
  const ModelDescription model = load_model(argc > 1 ? argv[1] : "gemma-3-1b-it");
  const Platform platform = cpu_platform();
  const DType dtype = DType::kBFloat16;
  const KvCacheDType kv_dtype = KvCacheDType::kAuto;

  // 1-2. Selection for every attention layer, and the KV cache it shapes.
  const Selector selector;
  const StartupPlan plan = plan_startup(model, {dtype, kv_dtype, std::nullopt}, platform, selector);
  std::printf("%s: %zu attention layers\n", model.name.c_str(), plan.layers.size());
  std::printf("%s\n", to_text(*plan.layers.front().selection, "  ").c_str());
  std::printf("%s\n", plan.kv_cache.describe().c_str());

  const int num_blocks = plan.kv_cache.num_blocks_for_bytes(size_t{256} << 20);
  KvCacheManager kv(plan.kv_cache, num_blocks);
  KvCacheStorage storage(plan.kv_cache, num_blocks);

  // One implementation per layer; one metadata builder per KV-cache group.
  std::vector<std::unique_ptr<AttentionImpl>> impls;
  std::vector<AttentionLayerParams> params;
  for (const LayerPlan& layer : plan.layers) {
    params.push_back(layer_params(layer.layer, dtype, kv_dtype));
    impls.push_back(layer.selection->chosen->make_impl(params.back()));
  }
  std::vector<std::unique_ptr<MetadataBuilder>> builders;
  for (const KvCacheGroup& group : plan.kv_cache.groups) {
    for (size_t i = 0; i < plan.layers.size(); ++i) {
      if (plan.layers[i].layer.index != group.layer_indices.front()) continue;
      builders.push_back(plan.layers[i].selection->chosen->make_builder(group.spec, params[i]));
    }
  }

  // 3. Two requests: a prefill of their prompts, then decode steps of one token each.
  const std::vector<int> prompt_lens = {37, 12};
  std::vector<int> computed(prompt_lens.size(), 0);
  for (size_t r = 0; r < prompt_lens.size(); ++r) kv.add_request(static_cast<RequestId>(r));
  std::mt19937 rng(2024);
  const ScalarType compute = scalar_type_of(dtype);
  for (int step = 0; step < 5; ++step) {
    std::vector<StepRequest> batch;
    for (size_t r = 0; r < prompt_lens.size(); ++r) {
      const int new_tokens = step == 0 ? prompt_lens[r] : 1;
      const AllocationStatus status =
          kv.allocate_slots(static_cast<RequestId>(r), computed[r], new_tokens);
      if (!status) throw Error(ErrorCode::kOutOfMemory, status.message());
      batch.push_back({static_cast<RequestId>(r), computed[r], new_tokens, false});
    }
    const std::vector<CommonAttentionMetadata> common = build_step_metadata(kv, batch);
    std::vector<const AttentionMetadata*> step_plans;
    for (size_t g = 0; g < builders.size(); ++g)
      step_plans.push_back(&builders[g]->build(common[g]));

    const int tokens = common.front().num_actual_tokens;
    int non_finite = 0;
    double checksum = 0;
    for (size_t i = 0; i < plan.layers.size(); ++i) {
      const AttentionLayerParams& p = params[i];
      const int group = plan.kv_cache.group_of_layer(p.layer_index).group_id;
      HostTensor q = random_rows(compute, tokens, p.num_heads, p.head_size, rng);
      HostTensor k = random_rows(compute, tokens, p.num_kv_heads, p.head_size, rng);
      HostTensor v = random_rows(compute, tokens, p.num_kv_heads, p.head_size_v, rng);
      HostTensor out(compute, {tokens, p.num_heads, p.head_size_v});
      impls[i]->forward(q.view(), k.view(), v.view(), storage.tensors(p.layer_index),
                        *step_plans[static_cast<size_t>(group)], out.view());
      for (int64_t e = 0; e < out.view().numel(); ++e) {
        const float x = load_as_float(out.data(), compute, e);
        non_finite += !std::isfinite(x);
        checksum += x;
      }
    }
    for (size_t r = 0; r < prompt_lens.size(); ++r) computed[r] += batch[r].num_new_tokens;
    std::printf("step %d: %s, %d tokens, %d free blocks, output checksum %.4f\n", step,
                step == 0 ? "prefill" : "decode", tokens, kv.num_free_blocks(), checksum);
    if (non_finite > 0) {
      std::fprintf(stderr, "step %d: %d non-finite outputs\n", step, non_finite);
      return 1;
    }
  }
  for (size_t r = 0; r < prompt_lens.size(); ++r) kv.free_request(static_cast<RequestId>(r));
  std::printf("ok: %d free blocks after the requests finished\n", kv.num_free_blocks());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "embed: %s\n", e.what());
  return 2;
}
