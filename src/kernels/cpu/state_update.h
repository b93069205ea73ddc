#pragma once
// Exact CPU references for the recurrent layers of hybrid models (vLLM's `mamba` KV-cache
// kind): causal depthwise conv1d (and LFM2's short conv), Mamba1 selective scan, Mamba2 SSD,
// gated delta net (Qwen3-Next GDN, Kimi-Linear KDA), MiniMax lightning (linear) attention
// and RecurrentGemma's RG-LRU. The math of each is in docs/state_layers.md.
//
// Every op processes one sequence's T >= 1 new tokens (a prefill chunk; T = 1 is decode),
// continuing from that sequence's state and updating it in place. A fresh sequence starts
// from an all-zero state. Inputs, outputs and states are float32; every sum and every
// nonlinearity is evaluated in double, and the state is rounded to float32 after every
// token, exactly as a cache that holds it between decode steps would. Each token's result is
// a function of (the float32 state, that token's inputs) only, so splitting a sequence into
// calls of any sizes gives the same outputs and the same final state as one call.
//
// Each op also has a `<op>_dense` form: the whole sequence from position 0, no state, all in
// double and written apart from the recurrent path (the quadratic "attention" form for the
// diagonal recurrences: Mamba1, Mamba2/SSD, linear attention, RG-LRU; a double-precision
// recurrence from zero for the delta rule). It is the oracle of the runtime's verifier; it
// can also write the state the recurrent path would hold after the sequence.
//
// Layouts: every buffer is dense row-major float32; `[T][C]` means element (t, c) is at
// t * C + c. Token rows follow each other with no padding (the row stride is the row width).
// Conv states are `[channels][K - 1]`, the last K - 1 conv inputs of each channel, oldest
// first (K = 1 keeps no conv state). No op allocates in its per-token loop (scratch vectors
// are sized once per call); no op throws. Parameters are trusted: `validate(params)` names
// what is wrong ("" when the params are usable) and the ops assume it returned "".

#include <cstdint>
#include <limits>
#include <string>

namespace attnkit::state {

// Float counts of one sequence's state of one layer: the conv state and the recurrent state
// (what vLLM's mamba cache spec calls the conv and the temporal/ssm state).
struct StateSizes {
  int64_t conv_elems = 0;
  int64_t recurrent_elems = 0;
};

// ---------------------------------------------------------------------------------------
// 1. Causal depthwise conv1d with state (the shared building block of every type below but
//    linear attention). out[t][c] = act(bias[c] + sum_{j<K} weight[c][j] * x~[t - (K-1) + j])
//    where x~ before the chunk's first token comes from the state (oldest first), so
//    weight[c][K-1] multiplies the current token (PyTorch's conv1d with left padding K-1).

enum class ConvActivation { kNone, kSilu };

struct CausalConvParams {
  int channels = 0;               // C
  int kernel_size = 0;            // K >= 1
  const float* weight = nullptr;  // [C][K]
  const float* bias = nullptr;    // [C], or nullptr for none
  ConvActivation activation = ConvActivation::kNone;
};

std::string validate(const CausalConvParams& p);
StateSizes causal_conv_state_sizes(const CausalConvParams& p);  // conv C * (K-1)
// x [T][C] -> out [T][C] (out may alias x); conv_state [C][K-1], updated in place to hold
// the last K - 1 inputs (including earlier chunks' when T < K - 1).
void causal_conv(const CausalConvParams& p, int num_tokens, const float* x, float* out,
                 float* conv_state);
// From zero; final_conv_state [C][K-1] (nullable) gets the last K - 1 inputs, zero-padded
// at the front when T < K - 1.
void causal_conv_dense(const CausalConvParams& p, int num_tokens, const float* x, float* out,
                       float* final_conv_state);

// LFM2's short conv: out = c (.) conv(b (.) x), no activation. The conv input b (.) x is
// rounded to float32 (it is what the conv state stores).
struct ShortConvParams {
  int hidden = 0;                 // H
  int kernel_size = 0;            // K >= 1
  const float* weight = nullptr;  // [H][K]
  const float* bias = nullptr;    // [H], or nullptr (LFM2's conv_bias = false)
};

std::string validate(const ShortConvParams& p);
StateSizes short_conv_state_sizes(const ShortConvParams& p);  // conv H * (K-1)
// b, c, x [T][H] (the three chunks of LFM2's in_proj, in that order) -> out [T][H];
// conv_state [H][K-1] holds the last K - 1 values of b (.) x.
void short_conv(const ShortConvParams& p, int num_tokens, const float* b, const float* c,
                const float* x, float* out, float* conv_state);
void short_conv_dense(const ShortConvParams& p, int num_tokens, const float* b, const float* c,
                      const float* x, float* out, float* final_conv_state);

// ---------------------------------------------------------------------------------------
// 2. Mamba1 selective scan (Mamba, Jamba, Falcon-Mamba). Per token:
//    xc = silu(conv(x)); [dt_low, B, C] = x_proj * xc; (optional RMS norms of dt_low, B, C);
//    dt = softplus(dt_proj * dt_low + dt_bias); h[d][n] = exp(dt[d] A[d][n]) h[d][n] +
//    dt[d] B[n] xc[d]; y[d] = (sum_n C[n] h[d][n] + Dskip[d] xc[d]) * silu(z[d]).

struct Mamba1Params {
  int d_inner = 0;                        // D
  int d_state = 0;                        // N
  int dt_rank = 0;                        // R
  int conv_kernel = 0;                    // K >= 1
  const float* conv_weight = nullptr;     // [D][K]
  const float* conv_bias = nullptr;       // [D], or nullptr
  const float* x_proj_weight = nullptr;   // [R + 2N][D]: rows [0, R) dt_low, [R, R+N) B, then C
  const float* dt_proj_weight = nullptr;  // [D][R]
  const float* dt_proj_bias = nullptr;    // [D]
  const float* a_log = nullptr;           // [D][N], A = -exp(a_log)
  const float* d_skip = nullptr;          // [D], or nullptr for none
  // Jamba's dt/B/C layernorms and Falcon-Mamba's weightless rms_forward: when set, dt_low, B
  // and C are each RMS-normalised (v * rsqrt(mean(v^2) + eps) * weight) before use.
  bool inner_rms_norm = false;
  float inner_rms_eps = 1e-6f;
  const float* dt_norm_weight = nullptr;  // [R], or nullptr for ones (Falcon-Mamba)
  const float* b_norm_weight = nullptr;   // [N], or nullptr for ones
  const float* c_norm_weight = nullptr;   // [N], or nullptr for ones
};

std::string validate(const Mamba1Params& p);
StateSizes mamba1_state_sizes(const Mamba1Params& p);  // conv D * (K-1), recurrent D * N
// x [T][D] (pre-conv), z [T][D] (the gate; nullptr for none) -> y [T][D];
// conv_state [D][K-1], ssm_state [D][N].
void mamba1(const Mamba1Params& p, int num_tokens, const float* x, const float* z, float* y,
            float* conv_state, float* ssm_state);
void mamba1_dense(const Mamba1Params& p, int num_tokens, const float* x, const float* z, float* y,
                  float* final_conv_state, float* final_ssm_state);

// ---------------------------------------------------------------------------------------
// 3. Mamba2 (SSD; Bamba, Nemotron-H, Falcon-H1, Granite-4, Zamba2). D = H * P; the conv runs
//    over xBC = [x (D) | B (G*N) | C (G*N)] then SiLU; head h uses group h / (H / G).
//    dt = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max); s[h][p][n] = exp(dt[h] A[h])
//    s[h][p][n] + dt[h] B[g][n] x[h][p]; y[h][p] = sum_n C[g][n] s[h][p][n] + Dskip[h] x[h][p].
//    The z gate, the gated RMS norm and the projections are the model's, outside the op.

struct Mamba2Params {
  int num_heads = 0;                   // H
  int head_dim = 0;                    // P
  int n_groups = 0;                    // G, divides H
  int d_state = 0;                     // N
  int conv_kernel = 0;                 // K >= 1
  const float* conv_weight = nullptr;  // [D + 2GN][K]
  const float* conv_bias = nullptr;    // [D + 2GN], or nullptr
  const float* dt_bias = nullptr;      // [H]
  const float* a_log = nullptr;        // [H], A = -exp(a_log)
  const float* d_skip = nullptr;       // [H], or nullptr for none
  float dt_min = 0.0f;                 // HF's time_step_limit
  float dt_max = std::numeric_limits<float>::infinity();
};

std::string validate(const Mamba2Params& p);
// conv (D + 2GN) * (K-1), recurrent H * P * N
StateSizes mamba2_state_sizes(const Mamba2Params& p);
// xbc [T][D + 2GN] (pre-conv), dt [T][H] (raw, before dt_bias and softplus) -> y [T][H][P];
// conv_state [D + 2GN][K-1], ssm_state [H][P][N].
void mamba2(const Mamba2Params& p, int num_tokens, const float* xbc, const float* dt, float* y,
            float* conv_state, float* ssm_state);
// The quadratic SSD form y = (L o C B^T) (dt x) + Dskip x, L[t][s] = exp(sum_{s<r<=t} dt_r A).
void mamba2_dense(const Mamba2Params& p, int num_tokens, const float* xbc, const float* dt,
                  float* y, float* final_conv_state, float* final_ssm_state);

// ---------------------------------------------------------------------------------------
// 4. Gated delta rule. The conv (then SiLU) runs over qkv = [q (Hk*dk) | k (Hk*dk) |
//    v (Hv*dv)]; q and k are L2-normalised per head (v * rsqrt(sum v^2 + eps)), q scaled by
//    dk^-1/2; value head v uses key head v / (Hv / Hk); beta = sigmoid(b). Per value head,
//    S [dk][dv]: S = diag(exp(g)) S; S += k (x) (beta (v - S^T k)); o = S^T q.
//    GDN (Qwen3-Next): g = -exp(A_log) softplus(a + dt_bias), one scalar per value head.
//    KDA (Kimi-Linear): g [dk] per value head, given directly (log decay, <= 0).
//    The output gate / gated RMS norm and the projections are the model's.

struct DeltaRuleParams {
  int num_k_heads = 0;                 // Hk
  int num_v_heads = 0;                 // Hv, a multiple of Hk
  int head_k_dim = 0;                  // dk
  int head_v_dim = 0;                  // dv
  int conv_kernel = 0;                 // K >= 1
  const float* conv_weight = nullptr;  // [2 Hk dk + Hv dv][K]
  const float* conv_bias = nullptr;    // [2 Hk dk + Hv dv], or nullptr (Qwen3-Next has none)
  const float* a_log = nullptr;        // [Hv] (GDN only; KDA ignores it)
  const float* dt_bias = nullptr;      // [Hv] (GDN only; KDA ignores it)
  float l2_eps = 1e-6f;
};

// For GDN (a_log and dt_bias required) and KDA (they are not read).
std::string validate_gated_delta_net(const DeltaRuleParams& p);
std::string validate_kimi_delta_attention(const DeltaRuleParams& p);
// conv (2 Hk dk + Hv dv) * (K-1), recurrent Hv * dk * dv
StateSizes delta_rule_state_sizes(const DeltaRuleParams& p);
// qkv [T][2 Hk dk + Hv dv] (pre-conv), a [T][Hv], b [T][Hv] (raw) -> out [T][Hv][dv];
// conv_state [2 Hk dk + Hv dv][K-1], recurrent_state [Hv][dk][dv].
void gated_delta_net(const DeltaRuleParams& p, int num_tokens, const float* qkv, const float* a,
                     const float* b, float* out, float* conv_state, float* recurrent_state);
void gated_delta_net_dense(const DeltaRuleParams& p, int num_tokens, const float* qkv,
                           const float* a, const float* b, float* out, float* final_conv_state,
                           float* final_recurrent_state);
// g [T][Hv][dk] (log decay per key channel), b [T][Hv] (raw) -> out [T][Hv][dv].
void kimi_delta_attention(const DeltaRuleParams& p, int num_tokens, const float* qkv,
                          const float* g, const float* b, float* out, float* conv_state,
                          float* recurrent_state);
void kimi_delta_attention_dense(const DeltaRuleParams& p, int num_tokens, const float* qkv,
                                const float* g, const float* b, float* out, float* final_conv_state,
                                float* final_recurrent_state);

// ---------------------------------------------------------------------------------------
// 5. Linear attention with a per-head exponential decay (MiniMax lightning attention):
//    kv_h = exp(-slope_h) kv_h + k^T v (outer product [d][d]); o = q kv_h. No conv, no
//    normalisation, no scale: q, k, v arrive projected and activated; the layer-dependent
//    slope factor of MiniMax is folded into `slope` by the model.

struct LinearAttentionParams {
  int num_heads = 0;             // H
  int head_dim = 0;              // d
  const float* slope = nullptr;  // [H], decay rates s_h > 0
};

std::string validate(const LinearAttentionParams& p);
StateSizes linear_attention_state_sizes(const LinearAttentionParams& p);  // recurrent H*d*d
// q, k, v [T][H][d] -> out [T][H][d]; recurrent_state [H][d (key dim)][d (value dim)].
void linear_attention(const LinearAttentionParams& p, int num_tokens, const float* q,
                      const float* k, const float* v, float* out, float* recurrent_state);
// o_t = sum_{s<=t} exp(-s_h (t - s)) (q_t . k_s) v_s.
void linear_attention_dense(const LinearAttentionParams& p, int num_tokens, const float* q,
                            const float* k, const float* v, float* out,
                            float* final_recurrent_state);

// ---------------------------------------------------------------------------------------
// 6. RG-LRU (RecurrentGemma's recurrent block core). xc = conv(x) + bias (no activation);
//    per block of width W/H: gate_x = sigmoid(xc W_x + b_x), gate_a = sigmoid(xc W_a + b_a)
//    (row vector times [in][out] matrix, as HF's baddbmm); log_a = -8 gate_a softplus(a_param);
//    a = exp(log_a); h = a h + sqrt(1 - a^2) (gate_x xc), except at position 0 where the
//    previous state is 0 and the multiplier is 1. The y branch, the product with it and the
//    projections are the model's.

struct RgLruParams {
  int width = 0;                             // W
  int num_blocks = 0;                        // H, divides W; block width bw = W / H
  int conv_kernel = 0;                       // K >= 1
  const float* conv_weight = nullptr;        // [W][K]
  const float* conv_bias = nullptr;          // [W], or nullptr
  const float* input_gate_weight = nullptr;  // [H][bw (in)][bw (out)]
  const float* input_gate_bias = nullptr;    // [W] = [H][bw]
  const float* a_gate_weight = nullptr;      // [H][bw (in)][bw (out)] (recurrence gate)
  const float* a_gate_bias = nullptr;        // [W]
  const float* a_param = nullptr;            // [W]
};

std::string validate(const RgLruParams& p);
StateSizes rg_lru_state_sizes(const RgLruParams& p);  // conv W * (K-1), recurrent W
// x [T][W] (pre-conv) -> h [T][W]; the chunk's first token is at absolute position
// start_position (0 for a sequence's first chunk: the state is then ignored);
// conv_state [W][K-1], recurrent_state [W].
void rg_lru(const RgLruParams& p, int num_tokens, int64_t start_position, const float* x,
            float* out, float* conv_state, float* recurrent_state);
// From position 0, in closed form h_t = sum_{s<=t} (prod_{s<r<=t} a_r) m_s (gate_x xc)_s.
void rg_lru_dense(const RgLruParams& p, int num_tokens, const float* x, float* out,
                  float* final_conv_state, float* final_recurrent_state);

}  // namespace attnkit::state
