#pragma once
// The state backends: exact CPU references for the recurrent-state layers of hybrid
// models (the `mamba` kind), one backend per layer type under vLLM's names where vLLM has
// one (MAMBA1, MAMBA2, GDN_ATTN, SHORT_CONV, LINEAR), plus KDA_ATTN (Kimi-Linear) and
// RG_LRU (RecurrentGemma). Each declares the one layer type its kernels run
// (kernels/cpu/state_update.h), computes in double with float32 states, and keeps one
// request's state in one cache block.

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

std::unique_ptr<AttentionBackend> make_mamba1_backend();
std::unique_ptr<AttentionBackend> make_mamba2_backend();
std::unique_ptr<AttentionBackend> make_gdn_attn_backend();
std::unique_ptr<AttentionBackend> make_kda_attn_backend();
std::unique_ptr<AttentionBackend> make_short_conv_backend();
std::unique_ptr<AttentionBackend> make_linear_backend();
std::unique_ptr<AttentionBackend> make_rg_lru_backend();

}  // namespace attnkit
