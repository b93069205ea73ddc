// attnkit._core.AttentionStack: attnkit::AttentionStack (runtime/attention_stack.h) over
// DLPack arrays. Arrays are viewed, never copied; the KV cache is handed out as DLPack
// views of the stack's own memory, which keep the stack alive.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "attnkit/backend/state_params.h"
#include "attnkit/core/error.h"
#include "attnkit/runtime/attention_stack.h"
#include "attnkit/selector/attention_config.h"
#include "module.h"

namespace attnkit::python {
namespace {

struct StackArgs {
  std::string model_kind, model_source, model_name;
  std::string platform;
  std::optional<std::string> dtype;
  std::string kv_cache_dtype;
  std::optional<int> block_size;
  std::string attention_config;
  int num_blocks = 0;
  size_t kv_cache_bytes = 0;
  int max_num_reqs = 0, max_num_tokens = 0, max_seq_len = 0;
  std::optional<bool> checked;
};

AttentionStack make_stack(const StackArgs& a) {
  AttentionStackOptions o;
  o.platform = resolve_platform(a.platform);
  if (a.dtype) o.dtype = parse<DType>(*a.dtype);
  o.kv_cache_dtype = parse<KvCacheDType>(a.kv_cache_dtype);
  if (a.block_size) {
    if (*a.block_size <= 0) {
      throw Error(
          ErrorCode::kInvalidArgument,
          "block_size must be a positive number of tokens, got " + std::to_string(*a.block_size));
    }
    o.block_size = a.block_size;
  }
  o.attention = load_attention_config(a.attention_config);
  o.num_blocks = a.num_blocks;
  o.kv_cache_bytes = a.kv_cache_bytes;
  o.limits.max_num_reqs = a.max_num_reqs;
  o.limits.max_num_tokens = a.max_num_tokens;
  o.limits.max_seq_len = a.max_seq_len;
  o.checked = a.checked;
  return AttentionStack(load_model_source(a.model_kind, a.model_source, a.model_name), o);
}

nb::dlpack::dtype dlpack_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
      return nb::dtype<float>();
    case ScalarType::kFloat16:
      return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case ScalarType::kBFloat16:
      return {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
    case ScalarType::kFp8E4M3:
    case ScalarType::kFp8E5M2:
    case ScalarType::kUInt8:
      return nb::dtype<uint8_t>();
    case ScalarType::kInt32:
      return nb::dtype<int32_t>();
    case ScalarType::kInt64:
      return nb::dtype<int64_t>();
  }
  return nb::dtype<uint8_t>();
}

// A DLPack view of cache memory owned by the stack (`owner` keeps it alive). fp8 caches are
// handed out as uint8 (DLPack 0.8 has no fp8 type); the dtype is in the layer's report.
nb::object cache_array(const TensorView& v, nb::handle owner) {
  if (v.empty()) return nb::none();
  const int device_type =
      v.device.type == DeviceType::kCuda ? nb::device::cuda::value : nb::device::cpu::value;
  std::vector<size_t> shape(v.shape.begin(), v.shape.begin() + v.ndim);
  std::vector<int64_t> strides(v.strides.begin(), v.strides.begin() + v.ndim);
  nb::ndarray<nb::array_api> array(v.data, static_cast<size_t>(v.ndim), shape.data(), owner,
                                   strides.data(), dlpack_dtype(v.dtype), device_type,
                                   v.device.index);
  return nb::cast(array, nb::rv_policy::reference);
}

// A cudaStream_t as Python hands it over: an integer (torch's cuda_stream, CuPy's ptr).
// The handle is an integer by contract, so the cast is the conversion itself.
void* stream_handle(uintptr_t value) {
  return reinterpret_cast<void*>(value);  // NOLINT(performance-no-int-to-ptr)
}

// The stream a forward() or plan_step() without one runs on: for CUDA arrays while
// PyTorch is loaded, PyTorch's current stream of the array's device (what torch ops use);
// otherwise the legacy default stream (pass stream= for CuPy or JAX streams).
void* default_stream(const TensorView& any) {
  if (any.device.type != DeviceType::kCuda) return nullptr;
  const TorchHooks* torch = torch_hooks();
  if (!torch || torch->current_raw_stream.is_none()) return nullptr;
  return stream_handle(nb::cast<uintptr_t>(torch->current_raw_stream(any.device.index)));
}

ExecutionContext context(std::optional<uintptr_t> stream, const TensorView& any, bool graph) {
  ExecutionContext ctx;
  ctx.stream = stream ? stream_handle(*stream) : default_stream(any);
  ctx.graph_shape = graph;
  return ctx;
}

nb::dict layer_dict(const StackLayer& layer) {
  nb::dict d;
  d["index"] = layer.index;
  d["name"] = layer.name;
  d["group"] = layer.group;
  d["backend"] = layer.selection->backend;
  d["chosen_by"] = std::string(to_string(layer.selection->chosen_by));
  d["kind"] = std::string(to_string(layer.params.kind));
  d["attn_type"] = std::string(to_string(layer.params.attn_type));
  d["num_heads"] = layer.params.num_heads;
  d["num_kv_heads"] = layer.params.num_kv_heads;
  d["head_size"] = layer.params.head_size;
  d["head_size_v"] = layer.params.head_size_v;
  d["scale"] = layer.params.scale;
  d["sliding_window"] = layer.params.sliding_window;
  d["soft_cap"] = layer.params.soft_cap;
  d["has_sinks"] = !layer.params.sinks.empty();
  d["use_mla"] = layer.params.use_mla;
  d["dtype"] = std::string(to_string(layer.params.dtype));
  d["kv_cache_dtype"] = std::string(to_string(layer.params.kv_cache_dtype));
  // A recurrent-state layer: its type, row widths and parameter segments (name, count),
  // in the order set_state_params() takes them; None for attention layers.
  if (const std::optional<StateLayerDims>& state = layer.params.state) {
    nb::dict s;
    s["type"] = std::string(to_string(state->type));
    s["input_width"] = state->input_width();
    s["output_width"] = state->output_width();
    nb::list segments;
    for (const StateParamSegment& seg : state_param_layout(*state)) {
      segments.append(nb::make_tuple(std::string(seg.name), seg.count));
    }
    s["param_segments"] = segments;
    s["num_params"] = state_param_count(*state);
    s["has_params"] = !layer.params.state_params.empty();
    d["state"] = s;
  } else {
    d["state"] = nb::none();
  }
  return d;
}

nb::dict metadata_dict(const CommonAttentionMetadata& c) {
  nb::dict d;
  d["num_reqs"] = c.num_reqs;
  d["num_actual_tokens"] = c.num_actual_tokens;
  d["query_start_loc"] = c.query_start_loc;
  d["seq_lens"] = c.seq_lens;
  d["block_table"] = c.block_table;
  d["max_blocks_per_req"] = c.max_blocks_per_req;
  d["block_size"] = c.block_size;
  d["slot_mapping"] = c.slot_mapping;
  d["max_query_len"] = c.max_query_len;
  d["max_seq_len"] = c.max_seq_len;
  d["causal"] = c.causal;
  return d;
}

std::string device_name(Device d) {
  return d.type == DeviceType::kCuda ? "cuda:" + std::to_string(d.index) : "cpu";
}

}  // namespace

void bind_stack(nb::module_& m) {
  using Request = std::tuple<int64_t, int, int, bool>;
  nb::class_<AttentionStack>(m, "AttentionStack")
      .def(
          "__init__",
          [](AttentionStack* self, const std::string& model_kind, const std::string& model_source,
             const std::string& model_name, const std::string& platform,
             const std::optional<std::string>& dtype, const std::string& kv_cache_dtype,
             std::optional<int> block_size, const std::string& attention_config, int num_blocks,
             size_t kv_cache_bytes, int max_num_reqs, int max_num_tokens, int max_seq_len,
             std::optional<bool> checked) {
            new (self) AttentionStack(
                make_stack({model_kind, model_source, model_name, platform, dtype, kv_cache_dtype,
                            block_size, attention_config, num_blocks, kv_cache_bytes, max_num_reqs,
                            max_num_tokens, max_seq_len, checked}));
          },
          nb::arg("model_kind"), nb::arg("model_source"), nb::arg("model_name"),
          nb::arg("platform"), nb::arg("dtype").none(), nb::arg("kv_cache_dtype"),
          nb::arg("block_size").none(), nb::arg("attention_config"), nb::arg("num_blocks"),
          nb::arg("kv_cache_bytes"), nb::arg("max_num_reqs"), nb::arg("max_num_tokens"),
          nb::arg("max_seq_len"), nb::arg("checked").none())
      .def_prop_ro("model_name", [](const AttentionStack& s) { return s.model().name; })
      .def_prop_ro("platform", [](const AttentionStack& s) { return s.platform().to_string(); })
      .def_prop_ro("device", [](const AttentionStack& s) { return device_name(s.device()); })
      .def_prop_ro("dtype",
                   [](const AttentionStack& s) { return std::string(to_string(s.dtype())); })
      .def_prop_ro("num_blocks", &AttentionStack::num_blocks)
      .def_prop_ro("num_free_blocks", &AttentionStack::num_free_blocks)
      .def_prop_ro("num_requests", &AttentionStack::num_requests)
      .def_prop_ro("num_groups",
                   [](const AttentionStack& s) {
                     return static_cast<int>(s.kv_cache_config().groups.size());
                   })
      .def_prop_ro("kv_cache_description",
                   [](const AttentionStack& s) { return s.kv_cache_config().describe(); })
      .def("layers",
           [](const AttentionStack& s) {
             nb::list out;
             for (const StackLayer& layer : s.layers()) out.append(layer_dict(layer));
             return out;
           })
      .def(
          "layer", [](const AttentionStack& s, int i) { return layer_dict(s.layer(i)); },
          nb::arg("layer"))
      .def(
          "kv_cache",
          [](nb::handle self, int layer) {
            const KvCacheTensors& t = nb::cast<const AttentionStack&>(self).kv_cache(layer);
            return nb::make_tuple(cache_array(t.key, self), cache_array(t.value, self),
                                  std::string(to_string(t.layout)), t.block_size);
          },
          nb::arg("layer"))
      .def(
          "set_sinks",
          [](AttentionStack& s, int layer,
             const nb::ndarray<const float, nb::ndim<1>, nb::device::cpu>& sinks) {
            std::vector<float> values(sinks.shape(0));
            for (size_t i = 0; i < values.size(); ++i) values[i] = sinks(i);
            s.set_sinks(layer, values);
          },
          nb::arg("layer"), nb::arg("sinks"))
      .def(
          "set_state_params",
          [](AttentionStack& s, int layer,
             const nb::ndarray<const float, nb::ndim<1>, nb::device::cpu>& params) {
            std::vector<float> values(params.shape(0));
            for (size_t i = 0; i < values.size(); ++i) values[i] = params(i);
            s.set_state_params(layer, values);
          },
          nb::arg("layer"), nb::arg("params"))
      .def("add_request", &AttentionStack::add_request, nb::arg("request_id"),
           nb::arg("encoder_len") = 0)
      .def("free_request", &AttentionStack::free_request, nb::arg("request_id"))
      .def("has_request", &AttentionStack::has_request, nb::arg("request_id"))
      .def("num_tokens", &AttentionStack::num_tokens, nb::arg("request_id"))
      .def(
          "plan_step",
          [](AttentionStack& s, const std::vector<Request>& batch, std::optional<uintptr_t> stream,
             bool graph_shape) {
            std::vector<StepRequest> requests;
            requests.reserve(batch.size());
            for (const auto& [id, computed, fresh, encoder] : batch) {
              requests.push_back({id, computed, fresh, encoder});
            }
            TensorView on_device;
            on_device.device = s.device();
            s.plan_step(requests, context(stream, on_device, graph_shape));
          },
          nb::arg("batch"), nb::arg("stream").none() = nb::none(), nb::arg("graph_shape") = false)
      .def(
          "step_metadata",
          [](const AttentionStack& s, int group) { return metadata_dict(s.step_metadata(group)); },
          nb::arg("group"))
      .def(
          "forward",
          [](AttentionStack& s, int layer, nb::handle query, nb::handle key, nb::handle value,
             nb::handle output, std::optional<uintptr_t> stream) {
            const ArrayArg<AnyArray> q = input_arg(query, "query");
            const auto optional = [](nb::handle a, const char* what) {
              return a.is_none() ? ArrayArg<AnyArray>{} : input_arg(a, what);
            };
            const ArrayArg<AnyArray> k = optional(key, "key"), v = optional(value, "value");
            const ArrayArg<AnyWritableArray> out = output_arg(output, "output");
            s.forward(layer, q.view, k.view, v.view, out.view, context(stream, q.view, false));
          },
          nb::arg("layer"), nb::arg("query"), nb::arg("key").none(), nb::arg("value").none(),
          nb::arg("output"), nb::arg("stream").none() = nb::none());
}

}  // namespace attnkit::python
