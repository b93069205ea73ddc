#include "attnkit/backend/forward_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "attnkit/backend/paged_params.h"
#include "attnkit/core/error.h"
#include "attnkit/core/options.h"

namespace attnkit {
namespace {

// Every forward runs these checks, so a passing check must cost no formatting: arguments
// are formatted only on failure, and tensors are passed as Described (their describe()
// string is built only then).
struct Described {
  const TensorView& tensor;
};

}  // namespace
}  // namespace attnkit

template <>
struct fmt::formatter<attnkit::Described> : fmt::formatter<std::string_view> {
  auto format(const attnkit::Described& d, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(d.tensor.describe(), ctx);
  }
};

namespace attnkit {
namespace {

template <typename... Args>
void require(bool ok, std::string_view backend, fmt::format_string<Args...> format,
             Args&&... args) {
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {}", backend, fmt::format(format, std::forward<Args>(args)...)));
  }
}

const char* device_name(DeviceType type) {
  return type == DeviceType::kCpu ? "host memory" : "a CUDA device";
}

// The device, dtype, alignment and last-dimension checks every tensor gets.
void check_tensor(const TensorView& t, const char* what, ScalarType dtype,
                  const ForwardCheckOptions& o) {
  require(t.device.type == o.device, o.backend, "{} must be in {} ({})", what,
          device_name(o.device), Described{t});
  require(t.dtype == dtype, o.backend, "{} has dtype {}, expected {}", what, to_string(t.dtype),
          to_string(dtype));
  require(t.ndim >= 2 && t.stride(t.ndim - 1) == 1, o.backend,
          "{} must be contiguous in its last dimension ({})", what, Described{t});
  if (o.vector_elements > 1) {
    for (int d = 0; d < t.ndim - 1; ++d) {
      require(t.stride(d) % o.vector_elements == 0, o.backend,
              "{} strides must be multiples of {} elements ({})", what, o.vector_elements,
              Described{t});
    }
    require(reinterpret_cast<uintptr_t>(t.data) % 16 == 0, o.backend,
            "{} data must be 16-byte aligned ({})", what, Described{t});
  }
}

// A [rows, heads, dim] view with at least `min_rows` rows ([rows, dim] when heads == 1 and
// allow_2d: MLA latents).
void check_rows(const TensorView& t, const char* what, ScalarType dtype, int64_t min_rows,
                int heads, int dim, const ForwardCheckOptions& o, bool allow_2d = false) {
  const bool two_d = allow_2d && t.ndim == 2;
  require(t.ndim == 3 || two_d, o.backend, "{} must be [tokens, {}, {}], got {}", what, heads, dim,
          Described{t});
  check_tensor(t, what, dtype, o);
  if (two_d) {
    require(t.size(1) == dim, o.backend, "{} must be [tokens, {}], got {}", what, dim,
            Described{t});
  } else {
    require(t.size(1) == heads && t.size(2) == dim, o.backend,
            "{} must be [tokens, {}, {}], got {}", what, heads, dim, Described{t});
  }
  require(t.size(0) >= min_rows, o.backend, "{} has {} rows, needs at least {}", what, t.size(0),
          min_rows);
}

// A paged cache tensor: NHD [num_blocks, block_size, heads, dim] or HND [num_blocks,
// heads, block_size, dim], as cache.layout says.
void check_cache(const TensorView& t, const char* what, const KvCacheTensors& cache,
                 ScalarType dtype, int heads, int dim, const ForwardCheckOptions& o) {
  require(!t.empty(), o.backend, "{} is empty but the layer reads a paged KV cache", what);
  const bool nhd = cache.layout == KvLayout::kNHD;
  const int64_t want_1 = nhd ? cache.block_size : heads;
  const int64_t want_2 = nhd ? heads : cache.block_size;
  const bool shape_ok =
      t.ndim == 4 && t.size(1) == want_1 && t.size(2) == want_2 && t.size(3) == dim;
  require(shape_ok, o.backend, "{} must be {} [num_blocks, {}, {}, {}], got {}", what,
          to_string(cache.layout), want_1, want_2, dim, Described{t});
  check_tensor(t, what, dtype, o);
}

int q_len_of(const CommonAttentionMetadata& c, int i) {
  const auto s = static_cast<size_t>(i);
  return c.query_start_loc[s + 1] - c.query_start_loc[s];
}

int32_t table_at(const CommonAttentionMetadata& c, int i, int b) {
  return c.block_table[static_cast<size_t>(i) * static_cast<size_t>(c.max_blocks_per_req) +
                       static_cast<size_t>(b)];
}

int64_t blocks_needed(const CommonAttentionMetadata& c, int i) {
  const int seq_len = c.seq_lens[static_cast<size_t>(i)];
  return seq_len == 0 ? 0 : (int64_t{seq_len} + c.block_size - 1) / c.block_size;
}

// Blocks the requests read (or the whole table) exist. check_common_metadata() has made
// sure the lengths fit the table.
void check_block_table(const CommonAttentionMetadata& c, int64_t num_blocks,
                       const ForwardCheckOptions& o) {
  for (int i = 0; i < c.num_reqs; ++i) {
    const int64_t needed = blocks_needed(c, i);
    const auto checked = o.whole_block_table ? int64_t{c.max_blocks_per_req} : needed;
    // One pass without branches per entry (a negative id is a huge unsigned one); the
    // entry is located only when the row fails.
    const int32_t* row =
        c.block_table.data() + static_cast<size_t>(i) * static_cast<size_t>(c.max_blocks_per_req);
    const auto limit = static_cast<uint32_t>(std::min<int64_t>(num_blocks, INT32_MAX));
    uint32_t outside = 0;
    for (int64_t b = 0; b < checked; ++b) outside |= static_cast<uint32_t>(row[b]) >= limit;
    if (outside == 0) continue;
    for (int b = 0; b < static_cast<int>(checked); ++b) {
      const int32_t block = table_at(c, i, b);
      require(block >= 0 && block < num_blocks, o.backend,
              "block_table[{}][{}] = {} is outside the cache (0..{})", i, b, block, num_blocks - 1);
    }
  }
}

// Checked mode: no slot is written twice, and each decoder row writes the slot its position
// has in its request's block table (either mistake would corrupt another token's K/V).
void check_slots_against_table(const ForwardArgs& a, const ForwardCheckOptions& o) {
  const CommonAttentionMetadata& c = a.common;
  std::vector<std::pair<int64_t, size_t>> written;
  written.reserve(c.slot_mapping.size());
  for (size_t t = 0; t < c.slot_mapping.size(); ++t) {
    if (c.slot_mapping[t] >= 0) written.emplace_back(c.slot_mapping[t], t);
  }
  std::sort(written.begin(), written.end());
  for (size_t k = 1; k < written.size(); ++k) {
    require(written[k].first != written[k - 1].first, o.backend,
            "slot_mapping[{}] and slot_mapping[{}] both write slot {} (each slot holds one token)",
            written[k - 1].second, written[k].second, written[k].first);
  }
  // Only when the slot mapping has one row per token, as the contract says (callers may
  // also write rows that no query of this step reads, e.g. a prompt's history).
  if (a.layer.attn_type == AttentionType::kDecoder &&
      c.slot_mapping.size() == static_cast<size_t>(c.num_actual_tokens)) {
    for (int i = 0; i < c.num_reqs; ++i) {
      const int q_len = q_len_of(c, i);
      const int first = c.seq_lens[static_cast<size_t>(i)] - q_len;
      for (int j = 0; j < q_len; ++j) {
        const size_t row =
            static_cast<size_t>(c.query_start_loc[static_cast<size_t>(i)]) + static_cast<size_t>(j);
        const int64_t slot = c.slot_mapping[row];
        if (slot < 0) continue;
        const int position = first + j;
        const int b = position / c.block_size;
        const int32_t block = table_at(c, i, b);
        const int64_t expected = int64_t{block} * c.block_size + position % c.block_size;
        require(slot == expected, o.backend,
                "slot_mapping[{}] = {} disagrees with the block table: request {} position {} "
                "lies in block_table[{}][{}] = {}, slot {}",
                row, slot, i, position, i, b, block, expected);
      }
    }
  }
}

}  // namespace

bool checked_mode_default() {
  static const bool value = [] {
    if (const std::optional<bool> set = option_switch(Option::kChecked)) return *set;
#ifdef NDEBUG
    return false;
#else
    return true;
#endif
  }();
  return value;
}

bool checked_mode(const AttentionLayerParams& layer) {
  return layer.checked.has_value() ? *layer.checked : checked_mode_default();
}

void check_layer_params(const AttentionLayerParams& layer, std::string_view backend) {
  require(layer.num_heads > 0 && layer.num_kv_heads > 0, backend,
          "num_heads {} and num_kv_heads {} must be positive", layer.num_heads, layer.num_kv_heads);
  require(layer.num_heads % layer.num_kv_heads == 0, backend,
          "num_heads {} is not a multiple of num_kv_heads {} (grouped-query attention shares "
          "each KV head among num_heads / num_kv_heads query heads)",
          layer.num_heads, layer.num_kv_heads);
  require(layer.head_size > 0 && layer.head_size_v > 0, backend,
          "head_size ({}) and head_size_v ({}) must be positive", layer.head_size,
          layer.head_size_v);
  require(layer.sliding_window >= 0, backend, "sliding_window {} is negative (0 = none)",
          layer.sliding_window);
  require(layer.chunk_size >= 0, backend, "chunk_size {} is negative (0 = none)", layer.chunk_size);
  require(layer.soft_cap >= 0.0f, backend, "soft_cap {} is negative (0 = none)", layer.soft_cap);
  require(layer.sinks.empty() || layer.sinks.size() == static_cast<size_t>(layer.num_heads),
          backend, "sinks has {} entries, expected num_heads = {} (or none)", layer.sinks.size(),
          layer.num_heads);
  if (layer.use_mla) {
    require(layer.num_kv_heads == 1, backend, "MLA layers have num_kv_heads 1, got {}",
            layer.num_kv_heads);
    require(layer.head_size_v <= layer.head_size, backend,
            "MLA head_size_v {} (kv_lora_rank) exceeds the latent width {}", layer.head_size_v,
            layer.head_size);
  }
}

void check_common_metadata(const CommonAttentionMetadata& c, const AttentionLayerParams& layer,
                           std::string_view backend) {
  require(c.num_reqs >= 0, backend, "num_reqs {} is negative", c.num_reqs);
  const auto reqs = static_cast<size_t>(c.num_reqs);
  require(c.query_start_loc.size() == reqs + 1, backend,
          "query_start_loc has {} entries, expected num_reqs + 1 = {}", c.query_start_loc.size(),
          reqs + 1);
  require(c.seq_lens.size() == reqs, backend, "seq_lens has {} entries, expected num_reqs = {}",
          c.seq_lens.size(), reqs);
  require(c.query_start_loc[0] == 0, backend, "query_start_loc[0] is {}, must be 0",
          c.query_start_loc[0]);
  for (size_t i = 0; i < reqs; ++i) {
    require(c.query_start_loc[i + 1] >= c.query_start_loc[i], backend,
            "query_start_loc must be non-decreasing (entry {} is {} after {})", i + 1,
            c.query_start_loc[i + 1], c.query_start_loc[i]);
    require(c.seq_lens[i] >= 0, backend, "seq_lens[{}] = {} is negative", i, c.seq_lens[i]);
  }
  require(c.query_start_loc[reqs] == c.num_actual_tokens, backend,
          "query_start_loc ends at {} but num_actual_tokens is {}", c.query_start_loc[reqs],
          c.num_actual_tokens);
  if (!uses_paged_cache(layer)) return;  // no cache: the block-table fields are not read
  require(c.max_blocks_per_req >= 0, backend, "max_blocks_per_req {} is negative",
          c.max_blocks_per_req);
  require(c.block_table.size() >= reqs * static_cast<size_t>(c.max_blocks_per_req), backend,
          "block_table has {} entries, needs at least num_reqs * max_blocks_per_req = {}",
          c.block_table.size(), reqs * static_cast<size_t>(c.max_blocks_per_req));
  require(c.block_table.empty() || c.block_size > 0, backend, "block_size {} must be positive",
          c.block_size);
  for (int i = 0; i < c.num_reqs; ++i) {
    const int seq_len = c.seq_lens[static_cast<size_t>(i)];
    require(seq_len == 0 || c.block_size > 0, backend,
            "block_size {} must be positive (request {} has seq_len {})", c.block_size, i, seq_len);
    const int64_t needed = blocks_needed(c, i);
    require(needed <= c.max_blocks_per_req, backend,
            "request {} needs {} blocks for {} tokens but max_blocks_per_req is {}", i, needed,
            seq_len, c.max_blocks_per_req);
  }
}

bool uses_paged_cache(const AttentionLayerParams& layer) {
  return layer.attn_type != AttentionType::kEncoder &&
         layer.attn_type != AttentionType::kEncoderOnly;
}

bool writes_cache(const ForwardArgs& args) {
  return uses_paged_cache(args.layer) && !args.key.empty() && !args.common.slot_mapping.empty();
}

void check_forward(const ForwardArgs& a, const ForwardCheckOptions& o) {
  const AttentionLayerParams& layer = a.layer;
  const CommonAttentionMetadata& c = a.common;
  check_common_metadata(c, layer, o.backend);
  const ScalarType dtype = scalar_type_of(layer.dtype);
  const int64_t tokens = c.num_actual_tokens;
  check_rows(a.query, "query", dtype, tokens, layer.num_heads, layer.head_size, o);
  check_rows(a.output, "output", dtype, tokens, layer.num_heads, layer.head_size_v, o);
  const bool fresh = !a.key.empty();
  const std::string_view type = to_string(layer.attn_type);

  if (!uses_paged_cache(layer)) {
    // Contiguous mode: each request attends over its own fresh rows.
    require(fresh, o.backend, "{} attention needs this step's key and value", type);
    require(!layer.use_mla, o.backend, "MLA layers cannot be {} attention", type);
    check_rows(a.key, "key", dtype, tokens, layer.num_kv_heads, layer.head_size, o);
    check_rows(a.value, "value", dtype, tokens, layer.num_kv_heads, layer.head_size_v, o);
    for (int i = 0; i < c.num_reqs; ++i) {
      const int seq_len = c.seq_lens[static_cast<size_t>(i)];
      require(seq_len == q_len_of(c, i), o.backend,
              "{} attention: request {} has seq_len {} but {} new tokens (must be equal)", type, i,
              seq_len, q_len_of(c, i));
    }
    return;
  }

  const auto rows = static_cast<int64_t>(c.slot_mapping.size());
  if (layer.attn_type == AttentionType::kDecoder) {
    for (int i = 0; i < c.num_reqs; ++i) {
      require(q_len_of(c, i) <= c.seq_lens[static_cast<size_t>(i)], o.backend,
              "request {} has {} new tokens but seq_len {} (the new tokens are the last tokens "
              "of the sequence)",
              i, q_len_of(c, i), c.seq_lens[static_cast<size_t>(i)]);
    }
  }
  if (fresh) {
    check_rows(a.key, "key", dtype, rows, layer.num_kv_heads, layer.head_size, o,
               /*allow_2d=*/layer.use_mla);
    if (!layer.use_mla) {
      require(!a.value.empty(), o.backend, "value is empty but key is not");
      check_rows(a.value, "value", dtype, rows, layer.num_kv_heads, layer.head_size_v, o);
    }
  } else {
    for (int64_t t = 0; t < rows; ++t) {
      require(c.slot_mapping[static_cast<size_t>(t)] < 0, o.backend,
              "key/value are required for {} layers: slot_mapping[{}] = {} writes a row (only "
              "cross attention may reuse a filled cache, with an empty slot_mapping)",
              type, t, c.slot_mapping[static_cast<size_t>(t)]);
    }
  }

  // Both are the KV-cache group's kernel block size (KvCacheGroup::kernel_block_size, the
  // one source: the runtime's storage and build_common_metadata() copy it), but forward()
  // takes them as separate arguments, so a caller can still pass two different values.
  require(a.cache.block_size == c.block_size, o.backend,
          "cache block size {} differs from the metadata's block size {} (both must be the "
          "KV-cache group's kernel block size)",
          a.cache.block_size, c.block_size);
  const ScalarType kv = scalar_type_of(layer.kv_cache_dtype, layer.dtype);
  check_cache(a.cache.key, "key cache", a.cache, kv, layer.num_kv_heads, layer.head_size, o);
  const int64_t num_blocks = a.cache.key.size(0);
  if (!layer.use_mla) {
    check_cache(a.cache.value, "value cache", a.cache, kv, layer.num_kv_heads, layer.head_size_v,
                o);
    require(a.cache.value.size(0) == num_blocks, o.backend,
            "key and value caches differ in blocks ({} vs {})", num_blocks, a.cache.value.size(0));
  }
  check_block_table(c, num_blocks, o);
  const int64_t capacity = num_blocks * a.cache.block_size;
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t slot = c.slot_mapping[static_cast<size_t>(t)];
    require(slot < capacity, o.backend,
            "slot_mapping[{}] = {} is outside the cache ({} blocks of {}): valid slots are "
            "0..{}, negative = do not write",
            t, slot, num_blocks, a.cache.block_size, capacity - 1);
  }
  if (checked_mode(layer)) check_slots_against_table(a, o);
}

}  // namespace attnkit
