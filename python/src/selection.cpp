// backends() and explain() from Python: the CLI's --json reports, as JSON text that the
// package turns into Python objects (one schema, docs/schemas/).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "attnkit/core/error.h"
#include "attnkit/explain/backends_report.h"
#include "attnkit/explain/explain.h"
#include "attnkit/selector/attention_config.h"
#include "module.h"

namespace attnkit::python {
namespace {

std::string backends_json(const std::string& platform) {
  return backends_to_json(resolve_platform(platform)).dump();
}

// The explanation of a model named as load_model_source() takes it, with the CLI's options.
Explanation explain_model(const std::string& model_kind, const std::string& model_source,
                          const std::string& model_name, const std::string& platform,
                          const std::optional<std::string>& dtype,
                          const std::string& kv_cache_dtype, std::optional<int> block_size,
                          const std::string& attention_config) {
  ExplainRequest request;
  request.platform = resolve_platform(platform);
  if (dtype) request.dtype = parse<DType>(*dtype);
  request.kv_cache_dtype = parse<KvCacheDType>(kv_cache_dtype);
  request.block_size = checked_block_size(block_size);
  request.attention = load_attention_config(attention_config);
  return explain(load_model_source(model_kind, model_source, model_name), request);
}

}  // namespace

void bind_selection(nb::module_& m) {
  m.def("backends_json", &backends_json, nb::arg("platform"),
        "`attnkit backends --json` for a platform ('' = this machine)");
  m.def(
      "backends_text", [](const std::string& p) { return backends_to_text(resolve_platform(p)); },
      nb::arg("platform"), "`attnkit backends` for a platform ('' = this machine)");
  m.def(
      "explain_json",
      [](const std::string& kind, const std::string& source, const std::string& name,
         const std::string& platform, const std::optional<std::string>& dtype,
         const std::string& kv_cache_dtype, std::optional<int> block_size,
         const std::string& attention_config) {
        return to_json(explain_model(kind, source, name, platform, dtype, kv_cache_dtype,
                                     block_size, attention_config))
            .dump();
      },
      nb::arg("model_kind"), nb::arg("model_source"), nb::arg("model_name"), nb::arg("platform"),
      nb::arg("dtype").none(), nb::arg("kv_cache_dtype"), nb::arg("block_size").none(),
      nb::arg("attention_config"), "`attnkit explain --json`");
  m.def(
      "explain_text",
      [](const std::string& kind, const std::string& source, const std::string& name,
         const std::string& platform, const std::optional<std::string>& dtype,
         const std::string& kv_cache_dtype, std::optional<int> block_size,
         const std::string& attention_config) {
        return to_text(explain_model(kind, source, name, platform, dtype, kv_cache_dtype,
                                     block_size, attention_config));
      },
      nb::arg("model_kind"), nb::arg("model_source"), nb::arg("model_name"), nb::arg("platform"),
      nb::arg("dtype").none(), nb::arg("kv_cache_dtype"), nb::arg("block_size").none(),
      nb::arg("attention_config"), "`attnkit explain`");
}

}  // namespace attnkit::python
