// The state backends' conformance cases catch what they are there to catch: a backend
// that forgets the state between steps, one that does not start a request from zero, and
// one that writes a block it does not own.

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "attnkit/conformance/conformance.h"
#include "attnkit/registry/registry.h"

namespace attnkit {
namespace {

using conformance::CaseStatus;
using conformance::ConformanceReport;

enum class StateMutation { kForgetsState, kNeverZeroes, kWritesBlockOne };

// Wraps a real state backend's implementation and breaks one rule.
class MutantImpl final : public AttentionImpl {
 public:
  MutantImpl(std::unique_ptr<AttentionImpl> inner, StateLayerDims dims, StateMutation m)
      : inner_(std::move(inner)), dims_(dims), mutation_(m) {}
  std::string_view backend_name() const override { return "MUTANT"; }
  void forward(const TensorView& q, const TensorView& k, const TensorView& v,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& out, const ExecutionContext& ctx) override {
    const CommonAttentionMetadata& m = metadata.common();
    for (int i = 0; i < m.num_reqs; ++i) {
      auto* rec =
          static_cast<float*>(cache.value.data) +
          static_cast<int64_t>(m.block_table[static_cast<size_t>(i)]) * cache.value.stride(0);
      if (mutation_ == StateMutation::kForgetsState) {
        std::memset(rec, 0, dims_.recurrent_elems() * sizeof(float));
      }
    }
    if (mutation_ == StateMutation::kNeverZeroes) {
      // Present every request as a continuing one, so the real impl never zeroes its block.
      CommonAttentionMetadata shifted = m;
      for (int32_t& s : shifted.seq_lens) s += 1;
      inner_->forward(q, k, v, cache, Plan(shifted), out, ctx);
      return;
    }
    inner_->forward(q, k, v, cache, metadata, out, ctx);
    if (mutation_ == StateMutation::kWritesBlockOne) {
      // Block 1 may belong to nobody: write one float of it.
      static_cast<float*>(cache.value.data)[cache.value.stride(0)] = 0.0f;
    }
  }

 private:
  class Plan final : public AttentionMetadata {
   public:
    explicit Plan(CommonAttentionMetadata c) : c_(std::move(c)) {}
    const CommonAttentionMetadata& common() const override { return c_; }

   private:
    CommonAttentionMetadata c_;
  };
  std::unique_ptr<AttentionImpl> inner_;
  StateLayerDims dims_;
  StateMutation mutation_;
};

class MutantBackend final : public AttentionBackend {
 public:
  MutantBackend(std::shared_ptr<const AttentionBackend> inner, StateMutation m)
      : inner_(std::move(inner)), mutation_(m) {}
  std::string_view name() const override { return "MUTANT"; }
  std::string_view description() const override { return "a broken state backend"; }
  const BackendCapabilities& capabilities() const override { return inner_->capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    return inner_->make_builder(spec, layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return std::make_unique<MutantImpl>(inner_->make_impl(layer), *layer.state, mutation_);
  }

 private:
  std::shared_ptr<const AttentionBackend> inner_;
  StateMutation mutation_;
};

ConformanceReport run_mutant(StateMutation m) {
  static const BackendRegistry registry;
  const MutantBackend mutant(registry.get("MAMBA2"), m);
  return conformance::run_conformance(mutant);
}

bool any_failure_says(const ConformanceReport& r, const std::string& text) {
  for (const auto& c : r.results) {
    if (c.status == CaseStatus::kFailed && c.message.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(StateConformance, CatchesABackendThatForgetsTheStateBetweenSteps) {
  const ConformanceReport r = run_mutant(StateMutation::kForgetsState);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(any_failure_says(r, "one prefill, chunks and single tokens disagree"));
}

TEST(StateConformance, CatchesABackendThatDoesNotStartARequestFromZero) {
  const ConformanceReport r = run_mutant(StateMutation::kNeverZeroes);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.count(CaseStatus::kPassed), 0);
  EXPECT_TRUE(any_failure_says(r, "NaN: a state not started from zero"));
}

TEST(StateConformance, CatchesABackendThatWritesABlockItDoesNotOwn) {
  const ConformanceReport r = run_mutant(StateMutation::kWritesBlockOne);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(any_failure_says(r, "owned by no request, was written"));
}

TEST(StateConformance, TheRealBackendPassesEveryCase) {
  static const BackendRegistry registry;
  const ConformanceReport r = conformance::run_conformance(*registry.get("MAMBA2"));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.count(CaseStatus::kFailed), 0);
  EXPECT_EQ(r.count(CaseStatus::kPassed), static_cast<int>(r.results.size()));
}

}  // namespace
}  // namespace attnkit
