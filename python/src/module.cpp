// attnkit._core: the C++ library seen from Python. The Python package (python/attnkit/)
// wraps it; everything that decides anything is the library's, so Python users get the
// CLI's selections, numbers and messages.
#include "module.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <type_traits>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "attnkit/model/model_loader.h"

namespace attnkit::python {
namespace {

// attnkit::Error -> the Python exception of its code (python/attnkit/_errors.py), whose
// classes also derive from the built-in one a Python user expects (ValueError, KeyError,
// MemoryError, ...).
const char* exception_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "InvalidArgumentError";
    case ErrorCode::kNotFound:
      return "NotFoundError";
    case ErrorCode::kUnsupported:
      return "UnsupportedError";
    case ErrorCode::kOutOfMemory:
      return "OutOfMemoryError";
    case ErrorCode::kPluginError:
      return "PluginError";
    case ErrorCode::kInternal:
      return "InternalError";
  }
  return "Error";
}

void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    nb::object errors = nb::module_::import_("attnkit._errors");
    nb::object cls = errors.attr(exception_name(e.code()));
    PyErr_SetString(cls.ptr(), e.what());
  }
}

DLTensor dl_tensor_of(void* data, size_t ndim, const int64_t* shape, const int64_t* strides,
                      nb::dlpack::dtype dtype, int32_t device_type, int32_t device_id) {
  DLTensor t{};
  t.data = data;
  t.ndim = static_cast<int32_t>(ndim);
  t.shape = const_cast<int64_t*>(shape);
  t.strides = const_cast<int64_t*>(strides);
  t.dtype = DLDataType{dtype.code, dtype.bits, dtype.lanes};
  t.device = DLDevice{static_cast<DLDeviceType>(device_type), device_id};
  return t;
}

template <typename Array>
TensorView view_of_array(const Array& a) {
  const size_t ndim = a.ndim();
  if (ndim > static_cast<size_t>(kMaxTensorDims)) {
    throw Error(ErrorCode::kInvalidArgument, "an array of " + std::to_string(ndim) +
                                                 " dimensions; attnkit takes at most " +
                                                 std::to_string(kMaxTensorDims));
  }
  const DLTensor t =
      dl_tensor_of(const_cast<void*>(static_cast<const void*>(a.data())), ndim, a.shape_ptr(),
                   a.stride_ptr(), a.dtype(), a.device_type(), a.device_id());
  return from_dlpack(t);
}

}  // namespace

// Leaked, so that nothing is released after the interpreter has finalized.
const TorchHooks* torch_hooks() {
  static TorchHooks& found = *new TorchHooks();
  if (!found.tensor_type.is_valid()) {
    nb::dict modules = nb::borrow<nb::dict>(nb::module_::import_("sys").attr("modules"));
    if (!modules.contains("torch")) return nullptr;
    const nb::object c = modules["torch"].attr("_C");
    found.to_dlpack = c.attr("_to_dlpack");
    found.current_raw_stream = nb::getattr(c, "_cuda_getCurrentRawStream", nb::none());
    found.tensor_type = modules["torch"].attr("Tensor");
  }
  return &found;
}

namespace {

// "numpy.ndarray", "list": the type as Python code would spell it.
std::string qualified_type_name(nb::handle object) {
  const nb::handle type = object.type();
  const std::string name = nb::cast<std::string>(nb::type_name(type));
  const std::string module = nb::cast<std::string>(nb::str(type.attr("__module__")));
  return module == "builtins" ? name : module + "." + name;
}

template <typename Array>
ArrayArg<Array> array_arg(nb::handle object, const char* what) {
  nb::object source = nb::borrow(object);
  if (const TorchHooks* torch = torch_hooks();
      torch &&
      PyObject_TypeCheck(object.ptr(), reinterpret_cast<PyTypeObject*>(torch->tensor_type.ptr()))) {
    // Tensor.__dlpack__ refuses these too: attnkit has no backward pass.
    if (nb::cast<bool>(object.attr("requires_grad"))) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(what) +
                      ": a tensor that requires grad; attnkit has no backward pass, so pass "
                      "tensor.detach() or run under torch.no_grad()");
    }
    source = torch->to_dlpack(object);
  }
  Array array;
  if (!nb::try_cast(source, array)) {
    constexpr bool writable = std::is_same_v<Array, AnyWritableArray>;
    const std::string message = std::string(what) +
                                (writable ? ": expected a writable array" : ": expected an array") +
                                " (a DLPack producer such as NumPy, PyTorch, JAX or CuPy), got " +
                                qualified_type_name(object);
    throw nb::type_error(message.c_str());
  }
  const TensorView view = view_of_array(array);
  return {std::move(array), view};
}

}  // namespace

ArrayArg<AnyArray> input_arg(nb::handle object, const char* what) {
  return array_arg<AnyArray>(object, what);
}
ArrayArg<AnyWritableArray> output_arg(nb::handle object, const char* what) {
  return array_arg<AnyWritableArray>(object, what);
}

std::optional<int> checked_block_size(std::optional<int> block_size) {
  if (block_size && *block_size <= 0) {
    throw Error(
        ErrorCode::kInvalidArgument,
        "block_size must be a positive number of tokens, got " + std::to_string(*block_size));
  }
  return block_size;
}

ModelDescription load_model_source(const std::string& kind, const std::string& source,
                                   const std::string& name) {
  if (kind == "path") return load_model(source);
  if (kind == "json") return parse_model_config_text(source, name, name);
  throw Error(ErrorCode::kInvalidArgument,
              "model source kind '" + kind + "' is not one of: path, json");
}

}  // namespace attnkit::python

NB_MODULE(_core, m) {
  using namespace attnkit::python;
  m.doc() = "attnkit's C++ library (selection, the paged KV cache, attention backends)";
  m.attr("__version__") = ATTNKIT_VERSION_STRING;
  m.attr("has_cuda") = bool{ATTNKIT_HAS_CUDA};
  m.attr("cuda_architectures") = ATTNKIT_CUDA_ARCHITECTURES;
  nb::register_exception_translator(translate_error);
  m.def("embedded_models", &attnkit::embedded_model_names,
        "Names of the model configs embedded in the library, sorted");
  bind_selection(m);
  bind_stack(m);
}
