/*
 * attnkit plugin ABI: third-party attention backends in shared libraries.
 *
 * Plain C (C99 headers <stddef.h>/<stdint.h>, no C++ types, no exceptions), so a plugin may
 * be built by another compiler, another C++ standard library, or in C. A plugin library
 * exports exactly one symbol:
 *
 *   AttnkitStatus* attnkit_plugin_init(uint32_t host_abi_version, const AttnkitHostApi* host,
 *                                      const AttnkitPluginTable** out_table);
 *
 * which hands the host a table of backend descriptors. The host (libattnkit) wraps each
 * descriptor in an adapter that implements the same C++ AttentionBackend interface the
 * built-in backends implement, so registry, selector, explain, runtime and conformance treat
 * plugin backends exactly like built-ins. docs/plugins.md is the guide; this header is the
 * contract.
 *
 * ---------------------------------------------------------------------------------------
 * Versioning (append-only)
 *   - ATTNKIT_PLUGIN_ABI_VERSION is a single integer, incremented whenever a struct gains a
 *     field, a constant gains a value, or a table gains a callback. Nothing is ever removed,
 *     reordered or retyped: structs only grow at the end.
 *   - Every struct starts with `struct_size` (sizeof the struct as its writer compiled it)
 *     and `abi_version` (the ABI version its writer was built against). A reader must not
 *     touch a field unless ATTNKIT_HAS_FIELD says the writer's struct contains it.
 *   - The host accepts plugins built against versions ATTNKIT_PLUGIN_ABI_MIN_VERSION up to
 *     its own ATTNKIT_PLUGIN_ABI_VERSION and rejects others ("too old" / "too new").
 *     A plugin receives the host's version in attnkit_plugin_init and may refuse a host that
 *     is older than it needs by returning an error status.
 *   - Arrays of structs are always arrays of POINTERS to structs, so every element can grow.
 *
 * Ownership (stated again on every pointer below)
 *   - "plugin-owned, static": allocated by the plugin, valid and unchanged until the host
 *     unloads the library. The host never frees it. The host unloads a library only after
 *     every backend, builder, plan and implementation made from it has been destroyed.
 *   - "host-owned, call": valid only for the duration of the call it is passed to; copy
 *     what must be kept.
 *   - Handles (AttnkitBuilder, AttnkitImpl) are created by the plugin and destroyed exactly
 *     once by the host through the matching destroy callback.
 *   - AttnkitStatus objects returned by the plugin are released exactly once by the host
 *     through status->release(status).
 *
 * Errors: every fallible call returns AttnkitStatus*; NULL means success. A plugin must not
 * let a C++ exception, longjmp or abort cross the boundary for anything a user can cause.
 *
 * Threads: callbacks on different handles may run concurrently; the host never calls into
 * one handle (builder or implementation) from two threads at once.
 *
 * Enumerations are int32_t fields with the ATTNKIT_* constants below (C enums have no fixed
 * size across compilers). Booleans are int32_t: 0 = false, anything else = true.
 * ---------------------------------------------------------------------------------------
 */
#ifndef ATTNKIT_PLUGIN_ABI_H_
#define ATTNKIT_PLUGIN_ABI_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes, and the oldest one a host built from it loads. */
#define ATTNKIT_PLUGIN_ABI_VERSION 1u
#define ATTNKIT_PLUGIN_ABI_MIN_VERSION 1u

/* The one symbol a plugin exports (see AttnkitPluginInitFn). */
#define ATTNKIT_PLUGIN_INIT_SYMBOL "attnkit_plugin_init"

/* Marks the entry point exported with default visibility (plugins should build with
 * hidden visibility and export nothing else). */
#if defined(_WIN32)
#define ATTNKIT_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ATTNKIT_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* True when `ptr` (a struct of type `type` written by the other side) is large enough to
 * contain `field`. Use before reading any field added after version 1. */
#ifdef __cplusplus
#define ATTNKIT_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(static_cast<const type*>(nullptr)->field))
#else
#define ATTNKIT_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((const type*)0)->field))
#endif

/* ------------------------------- Enumerations -------------------------------------- */

/* Compute dtypes (query, fresh key/value, output). */
#define ATTNKIT_DTYPE_FLOAT32 0
#define ATTNKIT_DTYPE_FLOAT16 1
#define ATTNKIT_DTYPE_BFLOAT16 2

/* KV-cache dtypes. AUTO = the compute dtype. fp8 values carry a per-tensor scale. */
#define ATTNKIT_KV_DTYPE_AUTO 0
#define ATTNKIT_KV_DTYPE_FLOAT16 1
#define ATTNKIT_KV_DTYPE_BFLOAT16 2
#define ATTNKIT_KV_DTYPE_FLOAT32 3
#define ATTNKIT_KV_DTYPE_FP8_E4M3 4
#define ATTNKIT_KV_DTYPE_FP8_E5M2 5

/* Element types of tensors and cache storage. dlpack 0.6 has no fp8 codes: fp8 caches
 * travel as uint8 DLTensors and AttnkitKvCache.storage_dtype says which fp8 it is. */
#define ATTNKIT_SCALAR_FLOAT32 0
#define ATTNKIT_SCALAR_FLOAT16 1
#define ATTNKIT_SCALAR_BFLOAT16 2
#define ATTNKIT_SCALAR_FP8_E4M3 3
#define ATTNKIT_SCALAR_FP8_E5M2 4
#define ATTNKIT_SCALAR_INT32 5
#define ATTNKIT_SCALAR_INT64 6
#define ATTNKIT_SCALAR_UINT8 7

#define ATTNKIT_ATTN_DECODER 0         /* causal self-attention over the paged cache */
#define ATTNKIT_ATTN_ENCODER 1         /* bidirectional, encoder of encoder-decoder */
#define ATTNKIT_ATTN_ENCODER_ONLY 2    /* bidirectional, no cache */
#define ATTNKIT_ATTN_ENCODER_DECODER 3 /* cross attention over the encoder's cached K/V */

/* KV-cache group kinds (vLLM's spellings). */
#define ATTNKIT_KIND_FULL_ATTENTION 0
#define ATTNKIT_KIND_SLIDING_WINDOW 1
#define ATTNKIT_KIND_MLA_ATTENTION 2
#define ATTNKIT_KIND_SLIDING_WINDOW_MLA 3
#define ATTNKIT_KIND_CHUNKED_LOCAL_ATTENTION 4
#define ATTNKIT_KIND_SINK_FULL_ATTENTION 5
#define ATTNKIT_KIND_ENCODER_ONLY_ATTENTION 6
#define ATTNKIT_KIND_CROSS_ATTENTION 7

/* KV layouts. NHD: a block is [block_size, num_kv_heads, head_size]; HND: [num_kv_heads,
 * block_size, head_size]. head_size is always the stride-1 dimension. */
#define ATTNKIT_LAYOUT_ANY (-1) /* capabilities only: no requirement (host uses NHD) */
#define ATTNKIT_LAYOUT_NHD 0
#define ATTNKIT_LAYOUT_HND 1

#define ATTNKIT_PLATFORM_CPU 0
#define ATTNKIT_PLATFORM_CUDA 1

/* AttnkitPlatform.cpu_features bits (x86 ISA features the host detected). */
#define ATTNKIT_CPU_AVX2 (1u << 0)
#define ATTNKIT_CPU_FMA (1u << 1)
#define ATTNKIT_CPU_F16C (1u << 2)
#define ATTNKIT_CPU_AVX512F (1u << 3)
#define ATTNKIT_CPU_AVX512BW (1u << 4)
#define ATTNKIT_CPU_AVX512VL (1u << 5)
#define ATTNKIT_CPU_AVX512DQ (1u << 6)
#define ATTNKIT_CPU_AVX512_BF16 (1u << 7)
#define ATTNKIT_CPU_AVX512_FP16 (1u << 8)

/* Status codes. The host reports every non-NULL status as an attnkit::Error of code
 * kPluginError whose message names the backend, the call, this code and the message. */
#define ATTNKIT_STATUS_INVALID_ARGUMENT 1
#define ATTNKIT_STATUS_UNSUPPORTED 2
#define ATTNKIT_STATUS_OUT_OF_MEMORY 3
#define ATTNKIT_STATUS_INTERNAL 4

/* Host log levels (AttnkitHostApi.log). */
#define ATTNKIT_LOG_DEBUG 0
#define ATTNKIT_LOG_INFO 1
#define ATTNKIT_LOG_WARNING 2
#define ATTNKIT_LOG_ERROR 3

/* ------------------------------- Status -------------------------------------------- */

/* An error. Created by whoever returns it (the plugin, for every call below); the receiver
 * (the host) reads code and message, then calls release(status) exactly once. */
typedef struct AttnkitStatus AttnkitStatus;
struct AttnkitStatus {
  uint32_t struct_size;
  uint32_t abi_version;
  int32_t code;        /* ATTNKIT_STATUS_* */
  const char* message; /* owned by the status; NUL-terminated UTF-8, valid until release */
  /* Frees the status and its message (creator-owned code; may be a no-op for statics). */
  void (*release)(AttnkitStatus* status);
};

/* ------------------------------- Host services ------------------------------------- */

/* Services the host offers the plugin. Host-owned, valid until the library is unloaded. */
typedef struct AttnkitHostApi {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* host_version; /* e.g. "0.1.0"; host-owned, valid until unload */
  void* context;            /* host-owned; pass back to log() */
  /* Logs one message through the host's logger. `message` is plugin-owned, call (the host
   * copies it). May be called from any thread. */
  void (*log)(void* context, int32_t level, const char* message);
} AttnkitHostApi;

/* Collects human-readable reasons (e.g. why a configuration cannot be served). Host-owned,
 * call. add() copies `reason` (plugin-owned, call). */
typedef struct AttnkitReasonSink {
  uint32_t struct_size;
  uint32_t abi_version;
  void* context; /* host-owned; pass back to add() */
  void (*add)(void* context, const char* reason);
} AttnkitReasonSink;

/* ------------------------------- Capabilities (data) ------------------------------- */

/* A set of integers: exactly the `num_exact` values of `exact` when num_exact > 0, else
 * every value v with v % multiple_of == 0 and min <= v and (max == 0 or v <= max). */
typedef struct AttnkitSizeRule {
  uint32_t struct_size;
  uint32_t abi_version;
  const int32_t* exact; /* [num_exact]; plugin-owned, static; NULL when num_exact == 0 */
  uint32_t num_exact;
  int32_t multiple_of; /* >= 1 when num_exact == 0 */
  int32_t min;
  int32_t max; /* 0 = unbounded */
} AttnkitSizeRule;

/* What a backend can do: the same fields as attnkit::BackendCapabilities. Plugin-owned,
 * static (every pointer inside too). */
typedef struct AttnkitCapabilities {
  uint32_t struct_size;
  uint32_t abi_version;
  int32_t platform;               /* ATTNKIT_PLATFORM_* */
  int32_t min_compute_capability; /* CUDA: major*10+minor; 0 = unbounded */
  int32_t max_compute_capability; /* CUDA: 0 = unbounded */
  const int32_t* dtypes;          /* [num_dtypes] ATTNKIT_DTYPE_* */
  uint32_t num_dtypes;
  /* [num_kv_cache_dtypes] ATTNKIT_KV_DTYPE_* besides AUTO (AUTO is always accepted). */
  const int32_t* kv_cache_dtypes;
  uint32_t num_kv_cache_dtypes;
  const AttnkitSizeRule* head_sizes;         /* NULL = any head size */
  int32_t separate_v_head_size;              /* head_size_v may differ from head_size */
  const AttnkitSizeRule* kernel_block_sizes; /* NULL = any block size */
  int32_t preferred_block_size;              /* cache block size it wants, e.g. 16 */
  const int32_t* attention_types;            /* [num_attention_types] ATTNKIT_ATTN_* */
  uint32_t num_attention_types;
  int32_t mla;      /* serves MLA layers */
  int32_t mla_only; /* serves nothing but MLA layers */
  int32_t sliding_window;
  int32_t chunked_local;
  int32_t sinks;
  int32_t soft_cap;
  int32_t non_causal; /* bidirectional attention (encoder, encoder-only, cross) */
  int32_t batch_invariant;
  int32_t kv_connector;
  int32_t required_layout; /* ATTNKIT_LAYOUT_ANY, _NHD or _HND */
} AttnkitCapabilities;

/* ------------------------------- Host -> plugin descriptions ------------------------ */

/* What a layer asks (attnkit::SelectorConfig). Host-owned, call. */
typedef struct AttnkitSelectorConfig {
  uint32_t struct_size;
  uint32_t abi_version;
  int32_t head_size;
  int32_t head_size_v;
  int32_t num_heads;      /* 0 = unknown */
  int32_t num_kv_heads;   /* 0 = unknown */
  int32_t dtype;          /* ATTNKIT_DTYPE_* */
  int32_t kv_cache_dtype; /* ATTNKIT_KV_DTYPE_* */
  int32_t block_size;     /* user-requested cache block size; 0 = none */
  int32_t use_mla;
  int32_t mla_rope_dim;
  int32_t has_sinks;
  int32_t sliding_window; /* 0 = none */
  int32_t chunk_size;     /* 0 = none */
  float soft_cap;         /* 0 = none */
  int32_t attn_type;      /* ATTNKIT_ATTN_* */
  int32_t batch_invariant;
  int32_t kv_connector;
} AttnkitSelectorConfig;

/* Where attention would run. Host-owned, call. */
typedef struct AttnkitPlatform {
  uint32_t struct_size;
  uint32_t abi_version;
  int32_t kind; /* ATTNKIT_PLATFORM_* */
  int32_t cc_major;
  int32_t cc_minor;
  int32_t is_local;        /* a real device on this machine, not only described */
  uint32_t cpu_features;   /* ATTNKIT_CPU_* bits */
  const char* device_name; /* host-owned, call; "" when described */
} AttnkitPlatform;

/* One layer's fixed parameters (attnkit::AttentionLayerParams). Host-owned, call. */
typedef struct AttnkitLayerParams {
  uint32_t struct_size;
  uint32_t abi_version;
  int32_t layer_index;
  int32_t kind;      /* ATTNKIT_KIND_* */
  int32_t attn_type; /* ATTNKIT_ATTN_* */
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_size;
  int32_t head_size_v;
  float scale;            /* softmax scale applied to <q, k> */
  int32_t sliding_window; /* 0 = none */
  int32_t chunk_size;     /* 0 = none */
  float soft_cap;         /* 0 = none */
  const float* sinks;     /* [num_sinks] sink logits or NULL; host-owned, call (copy it) */
  uint32_t num_sinks;     /* 0 or num_heads */
  int32_t dtype;          /* ATTNKIT_DTYPE_* */
  int32_t kv_cache_dtype; /* ATTNKIT_KV_DTYPE_* (may be AUTO) */
  float k_scale;          /* fp8 per-tensor scales (1 otherwise) */
  float v_scale;
  int32_t use_mla;
  int32_t mla_rope_dim;
} AttnkitLayerParams;

/* A KV-cache group's spec (attnkit::KvCacheSpec). Host-owned, call. */
typedef struct AttnkitKvCacheSpec {
  uint32_t struct_size;
  uint32_t abi_version;
  int32_t kind;       /* ATTNKIT_KIND_* */
  int32_t block_size; /* tokens per cache block */
  int32_t num_kv_heads;
  int32_t head_size;
  int32_t head_size_v;
  int32_t dtype; /* ATTNKIT_SCALAR_*: resolved storage dtype */
  int32_t sliding_window;
  int32_t chunk_size;
  int32_t max_encoder_len;
} AttnkitKvCacheSpec;

/* One step's batch for one KV-cache group (attnkit::CommonAttentionMetadata); B = num_reqs.
 * Host-owned; valid (and unchanged) until the next build() on the same builder or its
 * destruction, so a plan may keep pointers into it. */
typedef struct AttnkitCommonMetadata {
  uint32_t struct_size;
  uint32_t abi_version;
  int32_t num_reqs;
  int32_t num_actual_tokens;      /* = query_start_loc[num_reqs] */
  const int32_t* query_start_loc; /* [B + 1]: request i's rows are [qsl[i], qsl[i+1]) */
  const int32_t* seq_lens;        /* [B]: keys request i attends over (incl. new tokens) */
  /* [B, max_blocks_per_req] row-major: physical (kernel-)block ids of request i's tokens
   * in order; unused entries hold null_block_id. */
  const int32_t* block_table;
  int32_t max_blocks_per_req;
  int32_t block_size;          /* kernel block size the block table is expressed in */
  const int64_t* slot_mapping; /* [num_actual_tokens]: block*block_size+offset; -1 = skip */
  int32_t max_query_len;
  int32_t max_seq_len;
  int32_t causal;
  const int32_t* encoder_seq_lens; /* [B] cross attention only, else NULL */
  int32_t null_block_id;
} AttnkitCommonMetadata;

/* One layer's paged KV cache. Host-owned, call (the tensors' memory is the host's cache,
 * which the plugin writes into during forward()).
 *   NHD: key [num_blocks, block_size, num_kv_heads, head_size],
 *        value [num_blocks, block_size, num_kv_heads, head_size_v]
 *   HND: key [num_blocks, num_kv_heads, block_size, head_size], value likewise.
 *   MLA: key [num_blocks, block_size, 1, latent_width], value NULL (V = key prefix).
 * Encoder-only layers: key and value NULL. */
typedef struct AttnkitKvCache {
  uint32_t struct_size;
  uint32_t abi_version;
  const DLTensor* key;   /* host-owned, call; NULL = no cache */
  const DLTensor* value; /* host-owned, call; NULL = none */
  int32_t layout;        /* ATTNKIT_LAYOUT_NHD or _HND */
  int32_t block_size;    /* kernel block size */
  int32_t storage_dtype; /* ATTNKIT_SCALAR_* of the cache elements (resolves AUTO, fp8) */
} AttnkitKvCache;

/* ------------------------------- Handles ------------------------------------------- */

/* Opaque plugin objects. Created by the plugin's *_create callbacks, destroyed exactly once
 * by the host through the matching *_destroy. */
typedef struct AttnkitBuilder AttnkitBuilder; /* metadata builder of one KV-cache group */
typedef struct AttnkitPlan AttnkitPlan;       /* one step's plan; owned by its builder */
typedef struct AttnkitImpl AttnkitImpl;       /* implementation of one layer */

/* ------------------------------- Backend descriptor -------------------------------- */

/* One backend. Plugin-owned, static. `user_data` (plugin-owned, static) is passed back to
 * every callback that takes it. Callbacks marked optional may be NULL. */
typedef struct AttnkitBackendDesc {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* name;        /* letters, digits, '_'; matched case-insensitively. "CUSTOM"
                              fills the reserved CUSTOM slot. Plugin-owned, static. */
  const char* description; /* one line; plugin-owned, static */
  const AttnkitCapabilities* capabilities; /* plugin-owned, static */
  void* user_data;

  /* Optional. How well this backend can run on this machine, asked once at load time:
   * *out_score = 0 means "cannot run here" and the host does not register it (write why
   * into `why`); any other value means it can. `why` is host-owned, call. NULL = always
   * runs. */
  AttnkitStatus* (*probe)(void* user_data, uint32_t* out_score, const AttnkitReasonSink* why);

  /* Optional combination hook: adds one reason to `reasons` per requirement of `config`
   * on `platform` that the flat capabilities cannot express. All arguments host-owned,
   * call. No reason added = it can serve the combination. */
  AttnkitStatus* (*check)(void* user_data, const AttnkitSelectorConfig* config,
                          const AttnkitPlatform* platform, const AttnkitReasonSink* reasons);

  /* Creates a metadata builder for one KV-cache group whose layers have `layer`'s shapes.
   * `spec` and `layer` host-owned, call. *out_builder: plugin-owned, destroyed by the host
   * with builder_destroy. */
  AttnkitStatus* (*builder_create)(void* user_data, const AttnkitKvCacheSpec* spec,
                                   const AttnkitLayerParams* layer, AttnkitBuilder** out_builder);
  void (*builder_destroy)(AttnkitBuilder* builder);
  /* Plans one step. `common` host-owned, valid until the next build on this builder (the
   * plan may point into it). *out_plan: owned by the builder, valid until the next build on
   * it or its destruction; the host never frees it. */
  AttnkitStatus* (*builder_build)(AttnkitBuilder* builder, const AttnkitCommonMetadata* common,
                                  AttnkitPlan** out_plan);

  /* Creates the implementation of one layer. `layer` host-owned, call. *out_impl:
   * plugin-owned, destroyed by the host with impl_destroy. */
  AttnkitStatus* (*impl_create)(void* user_data, const AttnkitLayerParams* layer,
                                AttnkitImpl** out_impl);
  void (*impl_destroy)(AttnkitImpl* impl);
  /* Writes this step's fresh key/value into `cache` at the plan's slot mapping, then
   * computes attention for every query token into `output` (the semantics of
   * attnkit/kernels/paged_attention_params.h).
   *   query  [T, num_heads, head_size]      compute dtype
   *   key    [T, num_kv_heads, head_size]   NULL when there are no fresh keys
   *   value  [T, num_kv_heads, head_size_v] NULL when there are no fresh values
   *   output [T, num_heads, head_size_v]    written by the plugin
   * All DLTensors are host-owned, call, CPU or CUDA memory per the backend's platform; shape
   * and strides are in elements (strides never NULL). `plan` came from builder_build of a
   * builder of this same backend and is valid for the call. */
  AttnkitStatus* (*impl_forward)(AttnkitImpl* impl, const DLTensor* query, const DLTensor* key,
                                 const DLTensor* value, const AttnkitKvCache* cache,
                                 const AttnkitPlan* plan, const DLTensor* output);
} AttnkitBackendDesc;

/* ------------------------------- Plugin table -------------------------------------- */

/* What attnkit_plugin_init returns. Plugin-owned, static (everything it points to too). */
typedef struct AttnkitPluginTable {
  uint32_t struct_size;
  uint32_t abi_version;       /* the ATTNKIT_PLUGIN_ABI_VERSION the plugin was built against */
  const char* plugin_name;    /* e.g. "attnkit-example-backend"; plugin-owned, static */
  const char* plugin_version; /* free-form, e.g. "1.0"; plugin-owned, static */
  const AttnkitBackendDesc* const* backends; /* [num_backends] plugin-owned, static */
  uint32_t num_backends;
  /* Optional: called once, right before the host unloads the library, after every object
   * made from it was destroyed. */
  void (*shutdown)(void);
} AttnkitPluginTable;

/* The entry point. `host_abi_version` is the host's ATTNKIT_PLUGIN_ABI_VERSION; `host` is
 * host-owned and valid until unload. On success returns NULL and sets *out_table; on
 * failure returns a status saying why (e.g. "needs attnkit plugin ABI 3, host has 2"). */
typedef AttnkitStatus* (*AttnkitPluginInitFn)(uint32_t host_abi_version, const AttnkitHostApi* host,
                                              const AttnkitPluginTable** out_table);

/* Every plugin defines this (and exports nothing else). */
ATTNKIT_PLUGIN_EXPORT AttnkitStatus* attnkit_plugin_init(uint32_t host_abi_version,
                                                         const AttnkitHostApi* host,
                                                         const AttnkitPluginTable** out_table);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTNKIT_PLUGIN_ABI_H_ */
