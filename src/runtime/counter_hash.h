#pragma once
// A counter-based hash: a pure function of a few 64-bit words, so any value drawn from it
// can be drawn again later from the same coordinates without storing it (the runtime's
// synthetic Q/K/V and workloads). Each word is folded in with the splitmix64 finaliser,
// whose avalanche makes neighbouring coordinates independent.

#include <cstdint>
#include <initializer_list>

namespace attnkit {

constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr uint64_t counter_hash(std::initializer_list<uint64_t> words) {
  uint64_t h = 0x6a09e667f3bcc909ull;
  for (const uint64_t w : words) h = splitmix64(h ^ splitmix64(w));
  return h;
}

// The top 24 bits of `h` as a float uniform in [-1, 1) (exact in fp32; callers round it to
// the tensor's dtype before use).
constexpr float unit_float(uint64_t h) {
  return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

}  // namespace attnkit
