#pragma once
// The tuned choice ("backend": "tuned"): among the backends that pass validate() for a
// layer, the one whose forward() is fastest on the layer's shapes on this device.
//
// Each candidate is timed on shape buckets (a phase, a batch size, a query length and a
// context length: default_tuning_buckets()); its score is the sum of its median times over
// the buckets; the lowest score wins (a tie goes to the backend earlier in the priority
// list). A phase key's "tuned" ("prefill_backend": "tuned") scores on that phase's buckets
// only, among the backends that pair with the other phase's, so that each phase may get its
// own fastest (a per-phase composite, backend/composite_backend.h). Timings live in a cache
// file (JSON) keyed by
//   device          CPU: its model name and the ISA attnkit's CPU kernels run (e.g.
//                   "cpu AMD EPYC 7B13 isa avx2"); CUDA: name, compute capability, SM count
//   library         attnkit's version
//   binary          a hash of the attnkit library file itself (library_binary_hash())
//   layer           the layer's SelectorConfig (every field)
//   bucket, backend
// An entry measured under another device, version or binary is ignored with a note. The
// cache file is ATTNKIT_TUNING_CACHE, else $XDG_CACHE_HOME/attnkit/tuning.json, else
// ~/.cache/attnkit/tuning.json (default_tuning_cache_path()); `attnkit tune` fills it, and
// a runtime that selects with a timer (ModelRunner, AttentionStack) measures what is
// missing on first use and saves it. Only valid backends are ever timed, so tuning never
// changes what a layer computes, only which valid backend computes it.

#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/export.h"

namespace attnkit {

inline constexpr const char* kTuningCacheEnvVar = "ATTNKIT_TUNING_CACHE";

// One timed shape: num_reqs requests of query_len new tokens each over context_len tokens
// (their prompt and this step's): decode is query_len 1.
struct ATTNKIT_API ShapeBucket {
  Phase phase = Phase::kDecode;
  int num_reqs = 1;
  int query_len = 1;
  int context_len = 1024;
  // "decode b8 q1 ctx1024"
  std::string describe() const;
  bool operator==(const ShapeBucket&) const = default;
};

// Decode: 1 and 16 requests over 1024 tokens; prefill: one request of 512 tokens.
ATTNKIT_API std::vector<ShapeBucket> default_tuning_buckets();

struct ATTNKIT_API TuningKey {
  std::string device;
  std::string library_version;
  std::string binary_hash;
  std::string describe() const;
  bool operator==(const TuningKey&) const = default;
};

// The device part of the key for `platform` (see above).
ATTNKIT_API std::string tuning_device_key(const Platform& platform);
// 64-bit FNV-1a of the bytes of the shared library (or executable) that holds attnkit's
// code, found through dladdr() of one of its functions; read once per process. Robust to
// rebuilds that keep the version: any change of the binary changes it.
ATTNKIT_API std::string library_binary_hash();
// This device, this version, this binary.
ATTNKIT_API TuningKey local_tuning_key(const Platform& platform);
ATTNKIT_API std::string default_tuning_cache_path();

struct ATTNKIT_API TimingEntry {
  TuningKey key;
  std::string layer;   // to_json(SelectorConfig).dump()
  std::string bucket;  // ShapeBucket::describe()
  std::string backend;
  double median_us = 0.0;
  int repeats = 0;
  bool operator==(const TimingEntry&) const = default;
};

class ATTNKIT_API TuningCache {
 public:
  // An absent file is an empty cache; a file that is not a tuning cache is an Error naming
  // it (a file of another schema version is read as empty, with a note).
  static TuningCache load(const std::string& path, std::vector<std::string>* notes = nullptr);
  // Writes the file (its folder is created), through a temporary file and a rename.
  void save(const std::string& path) const;

  const TimingEntry* find(const TuningKey& key, const std::string& layer, const std::string& bucket,
                          const std::string& backend) const;
  // Entries for (layer, bucket, backend) measured under another key, as "measured on ...".
  std::vector<const TimingEntry*> stale(const TuningKey& key, const std::string& layer,
                                        const std::string& bucket,
                                        const std::string& backend) const;
  // Adds or replaces the entry of the same key, layer, bucket and backend.
  void put(TimingEntry entry);
  const std::vector<TimingEntry>& entries() const { return entries_; }

 private:
  std::vector<TimingEntry> entries_;
};

// What measures (the runtime's: runtime/backend_timer.h): the median microseconds of one
// forward() of `backend` on a layer of `layer`'s configuration at `bucket`, on `platform`
// (local), over fresh random inputs.
class ATTNKIT_API BackendTimer {
 public:
  virtual ~BackendTimer() = default;
  virtual double median_forward_us(const AttentionBackend& backend, const SelectorConfig& layer,
                                   const Platform& platform, const ShapeBucket& bucket,
                                   int* repeats) = 0;
};

// One candidate's times, for reports.
struct ATTNKIT_API CandidateTiming {
  std::string backend;
  std::vector<std::pair<std::string, double>> median_us;  // per bucket
  double total_us = 0.0;
  bool measured_now = false;  // false: all from the cache
  bool operator==(const CandidateTiming&) const = default;
};

struct ATTNKIT_API TuningReport {
  std::optional<Phase> phase;         // the phase tuned on its own buckets; nullopt = both
  std::optional<std::string> winner;  // unset when the automatic choice stands
  std::string cache_path;
  std::string key;                       // TuningKey::describe()
  std::vector<CandidateTiming> timings;  // fastest first
  std::string why;                       // why the winner won, or why nothing was tuned
  std::vector<std::string> notes;        // stale entries ignored, timings missing
  bool operator==(const TuningReport&) const = default;
};

// The selector's access to timings: the cache file and, when given, a timer to measure
// what the cache lacks (then saved). Without a timer (e.g. `attnkit explain`) it only reads.
class ATTNKIT_API Tuning {
 public:
  explicit Tuning(std::string cache_path = default_tuning_cache_path(),
                  std::shared_ptr<BackendTimer> timer = nullptr,
                  std::vector<ShapeBucket> buckets = default_tuning_buckets());

  // Times of every candidate (all valid for `layer`), fastest first; a candidate without
  // a time for some bucket (no timer) is left out and named in report.notes. Fills
  // `report` (timings, notes; `why` is the caller's).
  // With `phase`, only that phase's buckets count (all of them when none is of that phase).
  void time_candidates(const std::vector<std::shared_ptr<const AttentionBackend>>& candidates,
                       const SelectorConfig& layer, const Platform& platform, TuningReport& report,
                       std::optional<Phase> phase = std::nullopt) const;

  const std::string& cache_path() const { return path_; }
  const std::vector<ShapeBucket>& buckets() const { return buckets_; }
  bool can_measure() const { return timer_ != nullptr; }

 private:
  std::string path_;
  std::shared_ptr<BackendTimer> timer_;
  std::vector<ShapeBucket> buckets_;
  mutable std::mutex mutex_;
};

ATTNKIT_API nlohmann::json to_json(const TuningReport& report);

}  // namespace attnkit
