// An attnkit plugin: the backend EXAMPLE_CPU, a straightforward CPU paged attention.
//
// It includes nothing of attnkit but plugin_abi.h and is built with -fno-exceptions and
// -fno-rtti: only plain C crosses the library boundary. Capabilities (a subset of what
// attnkit's built-ins offer): decoder self-attention (causal) with an optional sliding
// window, fp32/fp16/bf16 compute, KV cache in the compute dtype ("auto"), head sizes that
// are multiples of 8 up to 256 (K and V equal), any block size, NHD layout, GQA.
//
// Everything the host gives us is checked and reported through status objects; nothing
// here aborts on bad input.
#include <attnkit/plugin_abi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_attention.h"

namespace {

// --- Status objects ----------------------------------------------------------------------

void release_status(AttnkitStatus* status) {
  free(const_cast<char*>(status->message));
  free(status);
}

// Returned when malloc fails while making a status: static, release is a no-op.
void keep_static_status(AttnkitStatus* /*status*/) {}
AttnkitStatus g_out_of_memory = {sizeof(AttnkitStatus), ATTNKIT_PLUGIN_ABI_VERSION,
                                 ATTNKIT_STATUS_OUT_OF_MEMORY, "EXAMPLE_CPU: out of memory",
                                 &keep_static_status};

__attribute__((format(printf, 2, 3))) AttnkitStatus* make_status(int32_t code, const char* format,
                                                                 ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  AttnkitStatus* status = static_cast<AttnkitStatus*>(malloc(sizeof(AttnkitStatus)));
  char* message = static_cast<char*>(malloc(strlen(buffer) + 1));
  if (status == nullptr || message == nullptr) {
    free(status);
    free(message);
    return &g_out_of_memory;
  }
  memcpy(message, buffer, strlen(buffer) + 1);
  status->struct_size = sizeof(AttnkitStatus);
  status->abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  status->code = code;
  status->message = message;
  status->release = &release_status;
  return status;
}

const AttnkitHostApi* g_host = nullptr;

void log_debug(const char* message) {
  if (g_host != nullptr && g_host->log != nullptr) {
    g_host->log(g_host->context, ATTNKIT_LOG_DEBUG, message);
  }
}

// --- Capabilities (data) -----------------------------------------------------------------

const int32_t kDTypes[] = {ATTNKIT_DTYPE_FLOAT32, ATTNKIT_DTYPE_FLOAT16, ATTNKIT_DTYPE_BFLOAT16};
const int32_t kAttentionTypes[] = {ATTNKIT_ATTN_DECODER};
constexpr int32_t kHeadSizeMultiple = 8;
constexpr int32_t kMaxHeadSize = 256;

AttnkitSizeRule g_head_sizes;
AttnkitCapabilities g_capabilities;
AttnkitBackendDesc g_backend;
const AttnkitBackendDesc* g_backends[1];
AttnkitPluginTable g_table;

// --- Probe and combination hook ----------------------------------------------------------

// A portable C++ kernel runs on every CPU this library loads on.
AttnkitStatus* probe(void* /*user_data*/, uint32_t* out_score, const AttnkitReasonSink* /*why*/) {
  *out_score = 1;
  return nullptr;
}

// What the flat capabilities cannot say: query heads must split evenly over KV heads.
AttnkitStatus* check(void* /*user_data*/, const AttnkitSelectorConfig* config,
                     const AttnkitPlatform* /*platform*/, const AttnkitReasonSink* reasons) {
  if (config->num_heads > 0 && config->num_kv_heads > 0 &&
      config->num_heads % config->num_kv_heads != 0) {
    char text[160];
    snprintf(text, sizeof text, "num_heads %d is not a multiple of num_kv_heads %d",
             config->num_heads, config->num_kv_heads);
    reasons->add(reasons->context, text);
  }
  return nullptr;
}

// --- Metadata builder: the plan is each token's request and absolute position ------------

struct Plan {
  const AttnkitCommonMetadata* common;  // host-owned, valid while the plan is
  int32_t* token_request;               // [num_actual_tokens]
  int32_t* token_position;              // [num_actual_tokens]
  int32_t max_seq_len;
};

struct Builder {
  int32_t block_size;
  Plan plan;
  int32_t capacity;  // tokens token_request/token_position can hold
};

AttnkitStatus* builder_create(void* /*user_data*/, const AttnkitKvCacheSpec* spec,
                              const AttnkitLayerParams* /*layer*/, AttnkitBuilder** out) {
  Builder* b = static_cast<Builder*>(calloc(1, sizeof(Builder)));
  if (b == nullptr) return &g_out_of_memory;
  b->block_size = spec->block_size;
  *out = reinterpret_cast<AttnkitBuilder*>(b);
  return nullptr;
}

void builder_destroy(AttnkitBuilder* handle) {
  Builder* b = reinterpret_cast<Builder*>(handle);
  free(b->plan.token_request);
  free(b->plan.token_position);
  free(b);
}

AttnkitStatus* builder_build(AttnkitBuilder* handle, const AttnkitCommonMetadata* m,
                             AttnkitPlan** out_plan) {
  Builder* b = reinterpret_cast<Builder*>(handle);
  if (m->num_reqs < 0 || m->num_actual_tokens < 0 || m->block_size <= 0 ||
      (m->num_reqs > 0 &&
       (m->query_start_loc == nullptr || m->seq_lens == nullptr || m->block_table == nullptr)) ||
      (m->num_actual_tokens > 0 && m->slot_mapping == nullptr)) {
    return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT,
                       "EXAMPLE_CPU: malformed metadata (num_reqs %d, tokens %d, block_size %d)",
                       m->num_reqs, m->num_actual_tokens, m->block_size);
  }
  if (m->num_actual_tokens > b->capacity) {
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(m->num_actual_tokens);
    int32_t* request = static_cast<int32_t*>(realloc(b->plan.token_request, bytes));
    if (request != nullptr) b->plan.token_request = request;
    int32_t* position = static_cast<int32_t*>(realloc(b->plan.token_position, bytes));
    if (position != nullptr) b->plan.token_position = position;
    if (request == nullptr || position == nullptr) return &g_out_of_memory;
    b->capacity = m->num_actual_tokens;
  }
  int32_t max_seq_len = 0;
  for (int32_t i = 0; i < m->num_reqs; ++i) {
    const int32_t begin = m->query_start_loc[i];
    const int32_t end = m->query_start_loc[i + 1];
    const int32_t seq_len = m->seq_lens[i];
    if (begin < 0 || end < begin || end > m->num_actual_tokens || end - begin > seq_len ||
        seq_len > m->max_blocks_per_req * m->block_size) {
      return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT,
                         "EXAMPLE_CPU: request %d has query rows [%d, %d) and seq_len %d, which "
                         "do not fit %d tokens and %d blocks of %d",
                         i, begin, end, seq_len, m->num_actual_tokens, m->max_blocks_per_req,
                         m->block_size);
    }
    // Causal: a request's new tokens are the last end-begin positions of its sequence.
    for (int32_t t = begin; t < end; ++t) {
      b->plan.token_request[t] = i;
      b->plan.token_position[t] = seq_len - (end - begin) + (t - begin);
    }
    if (seq_len > max_seq_len) max_seq_len = seq_len;
  }
  b->plan.common = m;
  b->plan.max_seq_len = max_seq_len;
  *out_plan = reinterpret_cast<AttnkitPlan*>(&b->plan);
  return nullptr;
}

// --- Implementation ----------------------------------------------------------------------

struct Impl {
  example::Shape shape;
  int32_t scalar_type;  // ATTNKIT_SCALAR_* of q, k, v, out and the cache
};

int32_t scalar_of_dtype(int32_t dtype) {
  switch (dtype) {
    case ATTNKIT_DTYPE_FLOAT16:
      return ATTNKIT_SCALAR_FLOAT16;
    case ATTNKIT_DTYPE_BFLOAT16:
      return ATTNKIT_SCALAR_BFLOAT16;
    default:
      return ATTNKIT_SCALAR_FLOAT32;
  }
}

AttnkitStatus* impl_create(void* /*user_data*/, const AttnkitLayerParams* l, AttnkitImpl** out) {
  // The host only asks for layers validate() accepted; these checks guard direct callers.
  if (l->attn_type != ATTNKIT_ATTN_DECODER || l->use_mla || l->num_sinks > 0 ||
      l->soft_cap != 0.0f || l->chunk_size > 0 || l->kv_cache_dtype != ATTNKIT_KV_DTYPE_AUTO ||
      (l->dtype != ATTNKIT_DTYPE_FLOAT32 && l->dtype != ATTNKIT_DTYPE_FLOAT16 &&
       l->dtype != ATTNKIT_DTYPE_BFLOAT16)) {
    return make_status(ATTNKIT_STATUS_UNSUPPORTED,
                       "EXAMPLE_CPU serves decoder attention in fp32/fp16/bf16 with an auto KV "
                       "cache, without MLA, sinks, soft-capping or chunking (layer %d asked "
                       "otherwise)",
                       l->layer_index);
  }
  if (l->head_size <= 0 || l->head_size % kHeadSizeMultiple != 0 || l->head_size > kMaxHeadSize ||
      l->head_size_v != l->head_size || l->num_kv_heads <= 0 || l->num_heads <= 0 ||
      l->num_heads % l->num_kv_heads != 0) {
    return make_status(ATTNKIT_STATUS_UNSUPPORTED,
                       "EXAMPLE_CPU: unsupported shape (heads %d, kv heads %d, head_size %d, "
                       "head_size_v %d); head sizes are multiples of 8 up to 256",
                       l->num_heads, l->num_kv_heads, l->head_size, l->head_size_v);
  }
  Impl* impl = static_cast<Impl*>(calloc(1, sizeof(Impl)));
  if (impl == nullptr) return &g_out_of_memory;
  impl->shape = {l->num_heads,   l->num_kv_heads, l->head_size,
                 l->head_size_v, l->scale,        l->sliding_window};
  impl->scalar_type = scalar_of_dtype(l->dtype);
  *out = reinterpret_cast<AttnkitImpl*>(impl);
  return nullptr;
}

void impl_destroy(AttnkitImpl* impl) { free(impl); }

bool is_type(const DLTensor* t, int32_t scalar_type) {
  switch (scalar_type) {
    case ATTNKIT_SCALAR_FLOAT16:
      return t->dtype.code == kDLFloat && t->dtype.bits == 16;
    case ATTNKIT_SCALAR_BFLOAT16:
      return t->dtype.code == kDLBfloat && t->dtype.bits == 16;
    default:
      return t->dtype.code == kDLFloat && t->dtype.bits == 32;
  }
}

// Stride of dimension `d` in elements (DLPack: NULL strides = compact row-major).
int64_t stride_of(const DLTensor* t, int d) {
  if (t->strides != nullptr) return t->strides[d];
  int64_t s = 1;
  for (int i = t->ndim - 1; i > d; --i) s *= t->shape[i];
  return s;
}

void* data_of(const DLTensor* t) { return static_cast<char*>(t->data) + t->byte_offset; }

// Checks that `t` is a CPU tensor of `scalar_type` with the given dims (-1 = any).
AttnkitStatus* check_tensor(const char* what, const DLTensor* t, int32_t scalar_type, int ndim,
                            const int64_t* dims) {
  if (t == nullptr) {
    return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT, "EXAMPLE_CPU: %s is missing", what);
  }
  if (t->device.device_type != kDLCPU) {
    return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT,
                       "EXAMPLE_CPU: %s is on device type %d; only CPU memory is supported", what,
                       static_cast<int>(t->device.device_type));
  }
  if (!is_type(t, scalar_type) || t->dtype.lanes != 1) {
    return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT,
                       "EXAMPLE_CPU: %s has dtype code %d bits %d, expected the layer's dtype",
                       what, t->dtype.code, t->dtype.bits);
  }
  if (t->ndim != ndim) {
    return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT, "EXAMPLE_CPU: %s has rank %d, expected %d",
                       what, t->ndim, ndim);
  }
  for (int d = 0; d < ndim; ++d) {
    if (dims[d] >= 0 && t->shape[d] != dims[d]) {
      return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT,
                         "EXAMPLE_CPU: %s has size %lld in dimension %d, expected %lld", what,
                         static_cast<long long>(t->shape[d]), d, static_cast<long long>(dims[d]));
    }
  }
  return nullptr;
}

example::Rows rows_of(const DLTensor* t) {
  return {data_of(t), 0, stride_of(t, 0), stride_of(t, 1), stride_of(t, 2)};
}

example::PagedCache cache_of(const DLTensor* t, int32_t scalar_type) {
  return {data_of(t),      scalar_type,     t->shape[0],    stride_of(t, 0),
          stride_of(t, 1), stride_of(t, 2), stride_of(t, 3)};
}

AttnkitStatus* impl_forward(AttnkitImpl* handle, const DLTensor* query, const DLTensor* key,
                            const DLTensor* value, const AttnkitKvCache* cache,
                            const AttnkitPlan* plan_handle, const DLTensor* output) {
  const Impl* impl = reinterpret_cast<const Impl*>(handle);
  const Plan* plan = reinterpret_cast<const Plan*>(plan_handle);
  if (plan == nullptr) {
    return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT, "EXAMPLE_CPU: forward without a plan");
  }
  const AttnkitCommonMetadata* m = plan->common;
  const example::Shape& s = impl->shape;
  const int32_t type = impl->scalar_type;
  const int64_t tokens = m->num_actual_tokens;

  const int64_t q_dims[] = {tokens, s.num_heads, s.head_size};
  const int64_t k_dims[] = {tokens, s.num_kv_heads, s.head_size};
  const int64_t v_dims[] = {tokens, s.num_kv_heads, s.head_size_v};
  const int64_t o_dims[] = {tokens, s.num_heads, s.head_size_v};
  const int64_t kc_dims[] = {-1, cache->block_size, s.num_kv_heads, s.head_size};
  const int64_t vc_dims[] = {-1, cache->block_size, s.num_kv_heads, s.head_size_v};
  if (cache->layout != ATTNKIT_LAYOUT_NHD || cache->storage_dtype != type ||
      cache->block_size != m->block_size) {
    return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT,
                       "EXAMPLE_CPU: the cache must be NHD in the compute dtype with the plan's "
                       "block size %d (got layout %d, dtype %d, block size %d)",
                       m->block_size, cache->layout, cache->storage_dtype, cache->block_size);
  }
  AttnkitStatus* bad = check_tensor("query", query, type, 3, q_dims);
  if (bad == nullptr) bad = check_tensor("output", output, type, 3, o_dims);
  if (bad == nullptr) bad = check_tensor("key cache", cache->key, type, 4, kc_dims);
  if (bad == nullptr) bad = check_tensor("value cache", cache->value, type, 4, vc_dims);
  if (bad == nullptr && (key != nullptr || value != nullptr)) {
    bad = check_tensor("key", key, type, 3, k_dims);
    if (bad == nullptr) bad = check_tensor("value", value, type, 3, v_dims);
  }
  if (bad != nullptr) return bad;
  if (cache->key->shape[0] != cache->value->shape[0]) {
    return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT,
                       "EXAMPLE_CPU: key cache has %lld blocks, value cache %lld",
                       static_cast<long long>(cache->key->shape[0]),
                       static_cast<long long>(cache->value->shape[0]));
  }

  const example::Batch batch = {m->num_actual_tokens, plan->token_request, plan->token_position,
                                m->seq_lens,          m->block_table,      m->max_blocks_per_req,
                                m->block_size,        m->slot_mapping};
  const example::PagedCache kc = cache_of(cache->key, type);
  const example::PagedCache vc = cache_of(cache->value, type);
  if (key != nullptr) {
    example::Rows k = rows_of(key), v = rows_of(value);
    k.scalar_type = v.scalar_type = type;
    const int32_t t = example::write_cache(batch, s, k, v, kc, vc);
    if (t >= 0) {
      return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT,
                         "EXAMPLE_CPU: slot %lld of token %d lies outside the cache (%lld blocks "
                         "of %d)",
                         static_cast<long long>(m->slot_mapping[t]), t,
                         static_cast<long long>(kc.num_blocks), m->block_size);
    }
  }
  float* scratch = static_cast<float*>(malloc(
      sizeof(float) * static_cast<size_t>(example::attend_scratch_floats(plan->max_seq_len, s))));
  if (scratch == nullptr) return &g_out_of_memory;
  example::Rows q = rows_of(query), o = rows_of(output);
  q.scalar_type = o.scalar_type = type;
  const int32_t t = example::attend(batch, s, q, kc, vc, o, scratch);
  free(scratch);
  if (t >= 0) {
    return make_status(ATTNKIT_STATUS_INVALID_ARGUMENT,
                       "EXAMPLE_CPU: the block table of token %d's request points outside the "
                       "cache (%lld blocks)",
                       t, static_cast<long long>(kc.num_blocks));
  }
  return nullptr;
}

void fill_table() {
  g_head_sizes = {sizeof(AttnkitSizeRule), ATTNKIT_PLUGIN_ABI_VERSION, nullptr,     0,
                  kHeadSizeMultiple,       kHeadSizeMultiple,          kMaxHeadSize};

  AttnkitCapabilities& c = g_capabilities;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  c.platform = ATTNKIT_PLATFORM_CPU;
  c.dtypes = kDTypes;
  c.num_dtypes = sizeof kDTypes / sizeof kDTypes[0];
  c.kv_cache_dtypes = nullptr;  // only "auto": the cache stores the compute dtype
  c.num_kv_cache_dtypes = 0;
  c.head_sizes = &g_head_sizes;
  c.kernel_block_sizes = nullptr;  // any block size
  c.preferred_block_size = 16;
  c.attention_types = kAttentionTypes;
  c.num_attention_types = 1;
  c.sliding_window = 1;
  c.required_layout = ATTNKIT_LAYOUT_NHD;

  AttnkitBackendDesc& d = g_backend;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  d.name = "EXAMPLE_CPU";
  d.description = "Example plugin: straightforward CPU paged attention (decoder, sliding window)";
  d.capabilities = &g_capabilities;
  d.probe = &probe;
  d.check = &check;
  d.builder_create = &builder_create;
  d.builder_destroy = &builder_destroy;
  d.builder_build = &builder_build;
  d.impl_create = &impl_create;
  d.impl_destroy = &impl_destroy;
  d.impl_forward = &impl_forward;
  g_backends[0] = &g_backend;

  AttnkitPluginTable& t = g_table;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  t.plugin_name = "attnkit-example-backend";
  t.plugin_version = "1.0";
  t.backends = g_backends;
  t.num_backends = 1;
  t.shutdown = nullptr;
}

}  // namespace

extern "C" AttnkitStatus* attnkit_plugin_init(uint32_t host_abi_version, const AttnkitHostApi* host,
                                              const AttnkitPluginTable** out_table) {
  // Version 1 is all this plugin uses; any host from version 1 on can run it.
  if (host_abi_version < 1) {
    return make_status(ATTNKIT_STATUS_UNSUPPORTED,
                       "attnkit-example-backend needs plugin ABI version 1 or newer (host has %u)",
                       host_abi_version);
  }
  g_host = host;
  fill_table();
  log_debug("attnkit-example-backend 1.0: registering EXAMPLE_CPU");
  *out_table = &g_table;
  return nullptr;
}
