#pragma once
// REFERENCE: the exact, simple CPU backend that supports every feature attnkit knows
// (every head size, dtype and KV dtype including fp8, every attention type, MLA, windows,
// chunks, sinks, soft-capping, non-causal, any block size, NHD and HND). It is the oracle
// of the conformance suite and of every backend's tests.

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

std::unique_ptr<AttentionBackend> make_reference_backend();

}  // namespace attnkit
