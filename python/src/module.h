#pragma once
// Pieces of the attnkit._core extension module shared by its source files.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>
#include <string>

#include "attnkit/core/tensor.h"
#include "attnkit/model/model_description.h"

namespace attnkit::python {

namespace nb = nanobind;

// Any DLPack producer's array (NumPy, PyTorch, JAX, CuPy) on any device, any dtype: the
// checks are attnkit's own (from_dlpack, forward_check), so that Python gets the C++
// library's messages.
using AnyArray = nb::ndarray<nb::ro>;
using AnyWritableArray = nb::ndarray<>;

// PyTorch's pieces the bindings call, once PyTorch is imported (never imported here):
// nullptr before. current_raw_stream is None in a PyTorch without CUDA.
struct TorchHooks {
  nb::object tensor_type;         // torch.Tensor
  nb::object to_dlpack;           // torch._C._to_dlpack
  nb::object current_raw_stream;  // torch._C._cuda_getCurrentRawStream
};
const TorchHooks* torch_hooks();

// An array argument of a call, held for the call's duration, and its view: the library's
// from_dlpack() of its DLPack description (so unsupported dtypes and devices are the
// library's errors, naming them). A torch.Tensor
// (or a subclass) is exported with torch._C._to_dlpack, the C exporter Tensor.__dlpack__
// ends in: that method's Python-level checks and its hand-off to the legacy default stream
// cost microseconds per tensor, and attnkit runs on PyTorch's current stream (or the
// caller's stream=, who orders its own inputs); a tensor that requires grad is refused, as
// __dlpack__ refuses it. Anything else goes through nanobind's import (__dlpack__ or the
// buffer protocol). Not an array: TypeError naming `what` and the type.
template <typename Array>
struct ArrayArg {
  Array array;
  TensorView view;
};
ArrayArg<AnyArray> input_arg(nb::handle object, const char* what);
ArrayArg<AnyWritableArray> output_arg(nb::handle object, const char* what);

// A model given as ("path", path-or-embedded-name) or ("json", config.json text, name).
ModelDescription load_model_source(const std::string& kind, const std::string& source,
                                   const std::string& name);

// A user's cache block size: nullopt stays nullopt; a non-positive one is
// Error(kInvalidArgument) naming it.
std::optional<int> checked_block_size(std::optional<int> block_size);

void bind_selection(nb::module_& m);
void bind_stack(nb::module_& m);

}  // namespace attnkit::python
