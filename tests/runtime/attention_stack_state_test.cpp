// attnkit::AttentionStack with a hybrid model: its state layers take their parameters
// from the caller, keep each request's state in the stack's pool across steps, and give
// the dense form's outputs; the errors a caller can hit name the layer and the sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attnkit/backend/state_params.h"
#include "attnkit/core/error.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/runtime/attention_stack.h"
#include "backend/state_ops.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;

// Qwen3-Next's layout at a small size: three gated-delta-net layers, then full attention.
ModelDescription small_qwen3_next() {
  return parse_model_config_text(R"({
      "model_type": "qwen3_next", "num_hidden_layers": 4, "num_attention_heads": 4,
      "num_key_value_heads": 1, "head_dim": 32, "full_attention_interval": 4,
      "linear_num_key_heads": 2, "linear_key_head_dim": 16, "linear_num_value_heads": 4,
      "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4})",
                                 "qwen3-next-small", "inline.json");
}

AttentionStackOptions float32_stack() {
  AttentionStackOptions o;
  o.dtype = DType::kFloat32;
  o.kv_cache_bytes = size_t{16} << 20;
  return o;
}

TEST(AttentionStackState, StateLayersContinueAcrossStepsAndMatchTheDenseForm) {
  const ModelDescription m = small_qwen3_next();
  AttentionStack stack(m, float32_stack());
  const StateLayerDims dims = *m.layers[0].state;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<float> params;
  for (const StateParamSegment& s : state_param_layout(dims)) {
    for (size_t i = 0; i < s.count; ++i) params.push_back(state_param_value(s, u(rng)));
  }
  stack.set_state_params(0, params);
  EXPECT_EQ(stack.layer(0).selection->backend, "GDN_ATTN");
  EXPECT_EQ(stack.layer(3).selection->backend, "CPU_FLASH");

  // One request, fed as a prefill of 6 tokens and then 3 decodes.
  const int total = 9;
  std::vector<float> inputs(static_cast<size_t>(total * dims.input_width()));
  std::uniform_real_distribution<float> x(-1.0f, 1.0f);
  for (float& v : inputs) v = x(rng);
  stack.add_request(1);
  std::vector<float> outputs;
  int done = 0;
  for (int n : {6, 1, 1, 1}) {
    stack.plan_step(std::vector<StepRequest>{{1, done, n, false}});
    float* rows = inputs.data() + static_cast<size_t>(done * dims.input_width());
    const TensorView in =
        TensorView::contiguous(rows, ScalarType::kFloat32, {n, dims.input_width()});
    std::vector<float> out(static_cast<size_t>(n * dims.output_width()), std::nanf(""));
    const TensorView ov =
        TensorView::contiguous(out.data(), ScalarType::kFloat32, {n, dims.output_width()});
    stack.forward(0, in, {}, {}, ov);
    outputs.insert(outputs.end(), out.begin(), out.end());
    done += n;
  }
  std::vector<float> dense(outputs.size());
  run_state_layer_dense(dims, params, total, inputs.data(), dense.data());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < dense.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(outputs[i]) - dense[i]));
    scale = std::max(scale, std::abs(static_cast<double>(dense[i])));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LT(worst / scale, 1e-4);  // float32 state against the double dense form
}

TEST(AttentionStackState, ParametersAreCheckedAndRequiredNamingTheLayer) {
  const ModelDescription m = small_qwen3_next();
  AttentionStack stack(m, float32_stack());
  const StateLayerDims dims = *m.layers[1].state;
  stack.add_request(1);
  stack.plan_step(std::vector<StepRequest>{{1, 0, 2, false}});
  std::vector<float> in(static_cast<size_t>(2 * dims.input_width()), 0.5f);
  std::vector<float> out(static_cast<size_t>(2 * dims.output_width()));
  const TensorView iv =
      TensorView::contiguous(in.data(), ScalarType::kFloat32, {2, dims.input_width()});
  const TensorView ov =
      TensorView::contiguous(out.data(), ScalarType::kFloat32, {2, dims.output_width()});
  try {
    stack.forward(1, iv, {}, {}, ov);
    FAIL() << "a state layer ran without parameters";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("GDN_ATTN (layer 1): the layer has no parameters"));
  }
  try {
    stack.set_state_params(1, std::vector<float>(3, 0.0f));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("3 parameter values given, but gated_delta_net 2x16 keys, "
                                    "4x8 values, conv 4 needs " +
                                    std::to_string(state_param_count(dims))));
  }
  try {
    stack.set_state_params(3, std::vector<float>(3, 0.0f));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer 3 (layers.3.self_attn) is an attention layer"));
  }
}

}  // namespace
}  // namespace attnkit
