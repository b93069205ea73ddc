#include "attnkit/kv_cache/kv_cache_storage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "kv_cache/kv_test_support.h"

namespace attnkit {
namespace {

using testing::bf16_heads;
using testing::FakeBackend;

// Byte address of element (b, i1, i2, d) of a 4-d view.
uintptr_t address(const TensorView& v, int64_t b, int64_t i1, int64_t i2, int64_t d) {
  const int64_t e = b * v.stride(0) + i1 * v.stride(1) + i2 * v.stride(2) + d * v.stride(3);
  return reinterpret_cast<uintptr_t>(v.data) + static_cast<uintptr_t>(e) * size_of(v.dtype);
}

TEST(KvCacheView, NhdHndAndMlaStrides) {
  alignas(64) static unsigned char buf[1 << 16];
  KvCacheSpec spec = full_attention_spec(KvHeadShape{2, 8, 4, ScalarType::kFloat16});
  spec.block_size = 4;
  const KvCacheTensors nhd = make_layer_cache_view(buf, spec, KvLayout::kNHD, 4, 3, Device{});
  EXPECT_EQ(nhd.block_size, 4);
  EXPECT_EQ(nhd.key.shape, (std::array<int64_t, 6>{3, 4, 2, 8, 0, 0}));
  EXPECT_EQ(nhd.key.strides, (std::array<int64_t, 6>{96, 16, 8, 1, 0, 0}));
  EXPECT_EQ(nhd.value.shape, (std::array<int64_t, 6>{3, 4, 2, 4, 0, 0}));
  EXPECT_EQ(nhd.value.strides, (std::array<int64_t, 6>{96, 8, 4, 1, 0, 0}));
  EXPECT_EQ(static_cast<unsigned char*>(nhd.value.data) - buf, 64 * 2);
  const KvCacheTensors hnd = make_layer_cache_view(buf, spec, KvLayout::kHND, 4, 3, Device{});
  EXPECT_EQ(hnd.key.shape, (std::array<int64_t, 6>{3, 2, 4, 8, 0, 0}));
  EXPECT_EQ(hnd.key.strides, (std::array<int64_t, 6>{96, 32, 8, 1, 0, 0}));
  EXPECT_EQ(hnd.value.strides, (std::array<int64_t, 6>{96, 16, 4, 1, 0, 0}));
  KvCacheSpec mla = mla_spec(512, 64, ScalarType::kBFloat16);
  mla.block_size = 64;
  const KvCacheTensors m = make_layer_cache_view(buf, mla, KvLayout::kNHD, 16, 1, Device{});
  EXPECT_EQ(m.key.shape, (std::array<int64_t, 6>{4, 16, 1, 576, 0, 0}));
  EXPECT_EQ(m.key.strides, (std::array<int64_t, 6>{16 * 576, 576, 576, 1, 0, 0}));
  EXPECT_TRUE(m.value.empty());
  EXPECT_TRUE(
      make_layer_cache_view(buf, encoder_only_attention_spec(), KvLayout::kNHD, 0, 3, Device{})
          .key.empty());
}

// Every element of cache block b of every layer, through its (possibly virtual) view,
// lies in [buffer + b*page, buffer + (b+1)*page) and the block's elements tile that range
// exactly: blocks of different groups sharing a buffer never overlap.
void expect_blocks_tile_their_pages(const KvCacheConfig& c, const KvCacheStorage& storage) {
  for (const KvCacheGroup& g : c.groups) {
    if (!g.has_cache()) continue;
    const int n = g.kernel_blocks_per_block();
    const size_t elem = size_of(g.spec.dtype);
    for (size_t j = 0; j < g.layer_indices.size(); ++j) {
      const KvCacheTensors& t = storage.tensors(g.layer_indices[j]);
      const auto base = reinterpret_cast<uintptr_t>(storage.buffer(static_cast<int>(j)));
      for (int b = 0; b < storage.num_blocks(); ++b) {
        std::set<uintptr_t> seen;
        for (const TensorView* v : {&t.key, &t.value}) {
          if (v->empty()) continue;
          for (int64_t k = int64_t{b} * n; k < int64_t{b + 1} * n; ++k) {
            for (int64_t i1 = 0; i1 < v->size(1); ++i1) {
              for (int64_t i2 = 0; i2 < v->size(2); ++i2) {
                for (int64_t d = 0; d < v->size(3); ++d) {
                  const uintptr_t a = address(*v, k, i1, i2, d);
                  ASSERT_GE(a, base + b * c.page_size_bytes);
                  ASSERT_LT(a, base + (b + 1) * c.page_size_bytes);
                  ASSERT_TRUE(seen.insert(a).second) << "element written twice";
                }
              }
            }
          }
        }
        ASSERT_EQ(seen.size() * elem, c.page_size_bytes) << "group " << g.group_id;
      }
    }
  }
}

TEST(KvCacheStorage, GroupsShareBuffersWithoutOverlap) {
  // Full layers (2 heads x 16, bf16, NHD, 128 B/token, kernel blocks of 16) and sliding
  // layers (1 head, K 32 + V 16, fp32, HND, 192 B/token, block 32) share buffers: pages
  // unify at 6144 B, so the full layers get cache blocks of 48 seen as 3 kernel blocks of
  // 16. Encoder-only layers have no cache.
  const FakeBackend nhd16("NHD16", SizeRule::list({16}), 16, KvLayout::kNHD);
  const FakeBackend hnd("HND", SizeRule::any(), 32, KvLayout::kHND);
  std::vector<LayerKvInput> layers;
  for (int i = 0; i < 3; ++i) {
    layers.push_back(
        {3 * i, full_attention_spec(KvHeadShape{2, 16, 16, ScalarType::kBFloat16}), &nhd16});
    layers.push_back(
        {3 * i + 1, sliding_window_spec(KvHeadShape{1, 32, 16, ScalarType::kFloat32}, 64), &hnd});
    layers.push_back({3 * i + 2, encoder_only_attention_spec(), &hnd});
  }
  const KvCacheConfig c = plan_kv_cache(layers);
  ASSERT_EQ(c.groups.size(), 3u);
  EXPECT_EQ(c.page_size_bytes, 6144u);
  EXPECT_EQ(c.groups[0].spec.block_size, 48);
  EXPECT_EQ(c.groups[0].kernel_blocks_per_block(), 3);
  EXPECT_EQ(c.groups[1].spec.block_size, 32);
  const KvCacheStorage storage(c, 5);
  EXPECT_EQ(storage.total_bytes(), 3u * 5 * c.page_size_bytes);
  EXPECT_TRUE(storage.tensors(2).key.empty());
  EXPECT_EQ(storage.tensors(1).layout, KvLayout::kHND);
  expect_blocks_tile_their_pages(c, storage);
  EXPECT_THROW(storage.tensors(99), Error);
}

TEST(KvCacheStorage, RealModelsTileTheirPages) {
  const FakeBackend k16("K16", SizeRule::list({16}), 32);  // cache 32, kernel 16
  for (const auto& specs : {testing::gemma3_1b_specs(), testing::gpt_oss_20b_specs()}) {
    const KvCacheConfig c = plan_kv_cache(testing::layers_with(specs, k16));
    EXPECT_EQ(c.groups[0].kernel_blocks_per_block(), 2);
    const KvCacheStorage storage(c, 3);
    expect_blocks_tile_their_pages(c, storage);
  }
}

// Writing every group's blocks through the views, with the slot arithmetic of the cache
// update (slot / block_size, slot % block_size in kernel units), then reading back: no
// group overwrites another.
TEST(KvCacheStorage, SlotWritesThroughVirtualViewsStayInTheirBlock) {
  const FakeBackend k16("K16", SizeRule::list({16}), 16);
  const FakeBackend p64("P64", SizeRule::list({64}), 64);
  std::vector<LayerKvInput> layers;
  const auto specs = testing::gpt_oss_20b_specs();
  for (int i = 0; i < 4; ++i)
    layers.push_back({i, specs[static_cast<size_t>(i)], i % 2 ? &p64 : &k16});
  const KvCacheConfig c = plan_kv_cache(layers);
  ASSERT_EQ(c.groups[0].kernel_blocks_per_block(), 4);
  const int num_blocks = 6;
  KvCacheStorage storage(c, num_blocks);
  // Blocks 1..5 alternate between the two groups.
  auto owner = [](int b) { return b % 2; };
  auto tag = [](int layer, int64_t slot, int h, int d) {
    return static_cast<uint16_t>((layer * 7919 + slot * 131 + h * 17 + d) & 0x7fff);
  };
  for (int b = 1; b < num_blocks; ++b) {
    const KvCacheGroup& g = c.groups[static_cast<size_t>(owner(b))];
    for (int layer : g.layer_indices) {
      const KvCacheTensors& t = storage.tensors(layer);
      for (int off = 0; off < g.spec.block_size; ++off) {
        const int64_t slot = int64_t{b} * g.spec.block_size + off;
        for (int h = 0; h < 8; ++h) {
          for (int d = 0; d < 64; ++d) {
            auto* k = reinterpret_cast<uint16_t*>(
                address(t.key, slot / t.block_size, slot % t.block_size, h, d));
            *k = tag(layer, slot, h, d);
            auto* v = reinterpret_cast<uint16_t*>(
                address(t.value, slot / t.block_size, slot % t.block_size, h, d));
            *v = static_cast<uint16_t>(tag(layer, slot, h, d) ^ 0x5555);
          }
        }
      }
    }
  }
  for (int b = 1; b < num_blocks; ++b) {
    const KvCacheGroup& g = c.groups[static_cast<size_t>(owner(b))];
    for (int layer : g.layer_indices) {
      const KvCacheTensors& t = storage.tensors(layer);
      for (int off = 0; off < g.spec.block_size; ++off) {
        const int64_t slot = int64_t{b} * g.spec.block_size + off;
        for (int h = 0; h < 8; ++h) {
          for (int d = 0; d < 64; ++d) {
            ASSERT_EQ(*reinterpret_cast<uint16_t*>(
                          address(t.key, slot / t.block_size, slot % t.block_size, h, d)),
                      tag(layer, slot, h, d));
            ASSERT_EQ(*reinterpret_cast<uint16_t*>(
                          address(t.value, slot / t.block_size, slot % t.block_size, h, d)),
                      static_cast<uint16_t>(tag(layer, slot, h, d) ^ 0x5555));
          }
        }
      }
    }
  }
  // The null block was never written and reads as zeros.
  for (int j = 0; j < c.num_buffers; ++j) {
    const auto* p = static_cast<const unsigned char*>(storage.buffer(j));
    for (size_t i = 0; i < c.page_size_bytes; ++i) ASSERT_EQ(p[i], 0) << i;
  }
}

// A pluggable allocator: the storage asks it for every buffer, stamps its device on the
// views and gives everything back.
class CountingAllocator final : public KvMemoryAllocator {
 public:
  Device device() const override { return Device{DeviceType::kCuda, 3}; }
  void* allocate(size_t bytes) override {
    if (fail_after_ == 0) throw Error(ErrorCode::kOutOfMemory, "test device is full");
    --fail_after_;
    void* p = host_.allocate(bytes);
    live_[p] = bytes;
    return p;
  }
  void deallocate(void* ptr, size_t bytes) noexcept override {
    EXPECT_EQ(live_[ptr], bytes);
    live_.erase(ptr);
    host_.deallocate(ptr, bytes);
  }
  void fail_after(int n) { fail_after_ = n; }
  size_t live() const { return live_.size(); }

 private:
  HostKvMemoryAllocator host_;
  std::map<void*, size_t> live_;
  int fail_after_ = 1 << 30;
};

TEST(KvCacheStorage, AllocatorIsPluggable) {
  const FakeBackend any("ANY", SizeRule::any(), 16);
  const KvCacheConfig c = plan_kv_cache(testing::layers_with(testing::gpt_oss_20b_specs(), any));
  auto alloc = std::make_shared<CountingAllocator>();
  {
    KvCacheStorage storage(c, 4, alloc);
    EXPECT_EQ(alloc->live(), 12u);
    EXPECT_EQ(storage.tensors(5).key.device, (Device{DeviceType::kCuda, 3}));
    KvCacheStorage moved = std::move(storage);
    EXPECT_EQ(alloc->live(), 12u);
  }
  EXPECT_EQ(alloc->live(), 0u);
  alloc->fail_after(5);
  EXPECT_THROW(KvCacheStorage(c, 4, alloc), Error);
  EXPECT_EQ(alloc->live(), 0u);  // the 5 it got were returned
  EXPECT_THROW(KvCacheStorage(c, 1, alloc), Error);
}

}  // namespace
}  // namespace attnkit
