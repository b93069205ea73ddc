#pragma once
// REFERENCE: the exact, simple CPU backend that supports every feature attnkit knows
// (every head size, dtype and KV dtype including fp8, every attention type, MLA, windows,
// chunks, sinks, soft-capping, non-causal, any block size, NHD and HND). It is the oracle
// of the conformance suite and of every backend's tests.
//
// MLA: the latent cache is written once, with k_scale, so V (its first head_size_v
// elements) is read with k_scale too; the layer's v_scale is not used for MLA layers.

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

std::unique_ptr<AttentionBackend> make_reference_backend();

}  // namespace attnkit
