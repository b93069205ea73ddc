#pragma once
// Which backends automatic selection tries, in which order, for a layer on a platform.
//
// The order comes from priority rules (selector/priority_rule.h), data that may depend on
// the layer: the user's rules (the attention config's "priority") first, then the
// built-in ones, builtin_priority_rules():
//   cpu-mla   platform=cpu, mla=true:   CPU_MLA, CPU_FLASH, REFERENCE
//   cpu       platform=cpu:             CPU_FLASH, REFERENCE
//   cuda-mla  platform=cuda, mla=true:  CUDA_MLA, CUDA_FLASH, CUDA_PAGED
//   cuda      platform=cuda:            CUDA_FLASH, CUDA_PAGED   (REFERENCE never on CUDA)
// The first rule that matches gives the head of the list; the matching built-in rule's
// order follows (without repeats), then the rest below.
//   state layers (mamba kind), any platform: MAMBA1, MAMBA2, GDN_ATTN, KDA_ATTN,
//         SHORT_CONV, LINEAR, RG_LRU (each serves one layer type, on the CPU)
// followed by every backend registered at run time under a name of its own (not a built-in
// name, not one of the names above) that declares this platform kind, in registration
// order. Names that are not registered are skipped.

#include <span>
#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/export.h"
#include "attnkit/registry/registry.h"
#include "attnkit/selector/priority_rule.h"

namespace attnkit {

// The built-in priority list of a platform for a layer, before filtering by the registry.
ATTNKIT_API std::vector<std::string> builtin_priority(PlatformKind platform, bool use_mla);
// The built-in state backends, in priority order.
ATTNKIT_API std::vector<std::string> builtin_state_priority();

// The built-in priority rules, in the order they are tried.
ATTNKIT_API std::span<const PriorityRule> builtin_priority_rules();

// The candidates automatic selection walks for `config` on `platform`, best first, and the
// rule that ordered them. `user_rules` are tried before the built-in rules (attention
// layers only; state layers keep builtin_state_priority()).
ATTNKIT_API PriorityDecision priority_for(const BackendRegistry& registry, const Platform& platform,
                                          const SelectorConfig& config,
                                          std::span<const PriorityRule> user_rules = {});

// priority_for(...).order without user rules.
ATTNKIT_API std::vector<std::string> priority_list(const BackendRegistry& registry,
                                                   const Platform& platform,
                                                   const SelectorConfig& config);

// Why `backend` cannot run on `platform` at all, whatever the layer: wrong platform kind,
// compute capability outside its range, and (when `include_binary`) why this binary
// cannot run its kernels there. Empty = it can.
ATTNKIT_API std::vector<std::string> platform_reasons(const AttentionBackend& backend,
                                                      const Platform& platform,
                                                      bool include_binary = true);

}  // namespace attnkit
