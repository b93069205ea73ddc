#pragma once
// Deliberately broken backends for checking that the conformance suite catches real bugs.
// Each wraps REFERENCE, declares what REFERENCE declares (under its own name), and breaks
// one thing:
//   IGNORES_WINDOW      attends over the full causal context even when a window is set;
//   UNWRITTEN_ELEMENT   leaves the last output element of every step unwritten;
//   TRUNCATING_FP8      writes fp8 cache entries by truncation instead of rounding to
//                       nearest even (and then attends over what it wrote);
//   WRITES_SPARE_BLOCK  also scribbles over a cache block no request owns.

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit::testing {

enum class Mutation { kIgnoresWindow, kUnwrittenElement, kTruncatingFp8, kWritesSpareBlock };

std::unique_ptr<AttentionBackend> make_mutant_backend(Mutation mutation);

// REFERENCE under another name with the given capabilities (and an optional combination
// hook that rejects fp8 KV caches), for checking what the suite generates and skips.
std::unique_ptr<AttentionBackend> make_declaring_backend(BackendCapabilities caps,
                                                         bool reject_fp8_in_hook = false);

}  // namespace attnkit::testing
