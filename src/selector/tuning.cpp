#include "attnkit/selector/tuning.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "attnkit/core/json_text.h"
#include "attnkit/core/options.h"
#include "attnkit/kernels/cpu_isa.h"
#include "attnkit/selector/selection_report.h"

namespace attnkit {
namespace {

constexpr std::string_view kSchema = "attnkit-tuning-cache";
constexpr int kSchemaVersion = 1;

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t begin = line.find_first_not_of(" \t", colon + 1);
    return begin == std::string::npos ? std::string("unknown CPU") : line.substr(begin);
  }
  return "unknown CPU";
}

std::string hash_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "unreadable:" + path;
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof buffer);
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buffer[i]);
      h *= 0x100000001b3ull;
    }
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

TuningKey key_from_json(const nlohmann::json& j) {
  return {j.at("device").get<std::string>(), j.at("library_version").get<std::string>(),
          j.at("binary_hash").get<std::string>()};
}

}  // namespace

std::string ShapeBucket::describe() const {
  return fmt::format("{} b{} q{} ctx{}", to_string(phase), num_reqs, query_len, context_len);
}

std::vector<ShapeBucket> default_tuning_buckets() {
  return {
      {Phase::kDecode, 1, 1, 1024}, {Phase::kDecode, 16, 1, 1024}, {Phase::kPrefill, 1, 512, 512}};
}

std::string TuningKey::describe() const {
  return fmt::format("{}, attnkit {}, binary {}", device, library_version, binary_hash);
}

std::string tuning_device_key(const Platform& platform) {
  if (platform.kind == PlatformKind::kCpu) {
    return fmt::format("cpu {} isa {}", cpu_model_name(), cpu::to_string(cpu::active_cpu_isa()));
  }
  return fmt::format("cuda {} sm_{}{} {} SMs",
                     platform.device_name.empty() ? "(described)" : platform.device_name,
                     platform.cc_major, platform.cc_minor, platform.sm_count);
}

std::string library_binary_hash() {
  static const std::string hash = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&library_binary_hash), &info) == 0 ||
        info.dli_fname == nullptr) {
      return std::string("unknown");
    }
    std::string path = info.dli_fname;
    // The main executable is reported by the name it was started with.
    if (std::error_code ec; std::filesystem::exists("/proc/self/exe", ec) &&
                            std::filesystem::path(path).filename() == path) {
      path = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    }
    return hash_file(path);
  }();
  return hash;
}

TuningKey local_tuning_key(const Platform& platform) {
  return {tuning_device_key(platform), ATTNKIT_VERSION_STRING, library_binary_hash()};
}

std::string default_tuning_cache_path() {
  if (std::optional<std::string> path = option_text(Option::kTuningCache)) return *path;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (std::filesystem::path(xdg) / "attnkit" / "tuning.json").string();
  }
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home != nullptr && *home != '\0' ? home : ".") / ".cache" /
          "attnkit" / "tuning.json")
      .string();
}

TuningCache TuningCache::load(const std::string& path, std::vector<std::string>* notes) {
  TuningCache cache;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return cache;
  const std::string text = read_document(path, "Tuning cache file");
  nlohmann::json root;
  try {
    root = parse_json_text(text);
    if (!root.is_object() || root.value("schema", std::string()) != kSchema) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} is not an attnkit tuning cache (no \"schema\": \"{}\"); move "
                              "it away or point {} elsewhere",
                              path, kSchema, kTuningCacheEnvVar));
    }
    if (root.value("version", 0) != kSchemaVersion) {
      if (notes) {
        notes->push_back(
            fmt::format("tuning cache {} has version {}, this attnkit reads {}: "
                        "its entries are ignored and will be replaced",
                        path, root.value("version", 0), kSchemaVersion));
      }
      return cache;
    }
    for (const nlohmann::json& e : root.at("entries")) {
      cache.entries_.push_back({key_from_json(e.at("key")), e.at("layer").get<std::string>(),
                                e.at("bucket").get<std::string>(),
                                e.at("backend").get<std::string>(), e.at("median_us").get<double>(),
                                e.at("repeats").get<int>()});
    }
  } catch (const JsonTextError& e) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Tuning cache {} is not valid JSON: {}", path, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Tuning cache {} has a malformed entry: {}", path, e.what()));
  }
  return cache;
}

void TuningCache::save(const std::string& path) const {
  nlohmann::json entries = nlohmann::json::array();
  for (const TimingEntry& e : entries_) {
    entries.push_back({{"key",
                        {{"device", e.key.device},
                         {"library_version", e.key.library_version},
                         {"binary_hash", e.key.binary_hash}}},
                       {"layer", e.layer},
                       {"bucket", e.bucket},
                       {"backend", e.backend},
                       {"median_us", e.median_us},
                       {"repeats", e.repeats}});
  }
  const nlohmann::json root = {
      {"schema", kSchema}, {"version", kSchemaVersion}, {"entries", entries}};
  const std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << root.dump(1) << "\n";
    if (!out) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("cannot write the tuning cache {} (set {} to another file)",
                              temporary, kTuningCacheEnvVar));
    }
  }
  std::filesystem::rename(temporary, target, ec);
  if (ec) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cannot write the tuning cache {}: {}", path, ec.message()));
  }
}

const TimingEntry* TuningCache::find(const TuningKey& key, const std::string& layer,
                                     const std::string& bucket, const std::string& backend) const {
  for (const TimingEntry& e : entries_) {
    if (e.key == key && e.layer == layer && e.bucket == bucket && e.backend == backend) return &e;
  }
  return nullptr;
}

std::vector<const TimingEntry*> TuningCache::stale(const TuningKey& key, const std::string& layer,
                                                   const std::string& bucket,
                                                   const std::string& backend) const {
  std::vector<const TimingEntry*> out;
  for (const TimingEntry& e : entries_) {
    if (!(e.key == key) && e.layer == layer && e.bucket == bucket && e.backend == backend) {
      out.push_back(&e);
    }
  }
  return out;
}

void TuningCache::put(TimingEntry entry) {
  for (TimingEntry& e : entries_) {
    if (e.key == entry.key && e.layer == entry.layer && e.bucket == entry.bucket &&
        e.backend == entry.backend) {
      e = std::move(entry);
      return;
    }
  }
  entries_.push_back(std::move(entry));
}

Tuning::Tuning(std::string cache_path, std::shared_ptr<BackendTimer> timer,
               std::vector<ShapeBucket> buckets)
    : path_(std::move(cache_path)), timer_(std::move(timer)), buckets_(std::move(buckets)) {
  if (buckets_.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "tuning needs at least one shape bucket");
  }
}

void Tuning::time_candidates(const std::vector<std::shared_ptr<const AttentionBackend>>& candidates,
                             const SelectorConfig& layer, const Platform& platform,
                             TuningReport& report, std::optional<Phase> phase) const {
  std::lock_guard lock(mutex_);
  std::vector<ShapeBucket> buckets;
  for (const ShapeBucket& b : buckets_) {
    if (!phase || b.phase == *phase) buckets.push_back(b);
  }
  if (buckets.empty()) {
    report.notes.push_back(
        fmt::format("no {} bucket to tune on: every bucket counts", to_string(*phase)));
    buckets = buckets_;
  }
  report.cache_path = path_;
  const TuningKey key = local_tuning_key(platform);
  report.key = key.describe();
  TuningCache cache = TuningCache::load(path_, &report.notes);
  const std::string layer_key = to_json(layer).dump();
  bool measured = false;
  for (const std::shared_ptr<const AttentionBackend>& backend : candidates) {
    CandidateTiming timing;
    timing.backend = std::string(backend->name());
    bool complete = true;
    for (const ShapeBucket& bucket : buckets) {
      const std::string bucket_key = bucket.describe();
      const TimingEntry* hit = cache.find(key, layer_key, bucket_key, timing.backend);
      bool stale = false;
      if (hit == nullptr) {
        for (const TimingEntry* old : cache.stale(key, layer_key, bucket_key, timing.backend)) {
          stale = true;
          report.notes.push_back(
              fmt::format("{} {}: the cached time was measured on {}, not this {}: ignored",
                          timing.backend, bucket_key, old->key.describe(), key.describe()));
        }
      }
      double us = 0.0;
      if (hit != nullptr) {
        us = hit->median_us;
      } else if (timer_ != nullptr && platform.is_local) {
        int repeats = 0;
        us = timer_->median_forward_us(*backend, layer, platform, bucket, &repeats);
        cache.put({key, layer_key, bucket_key, timing.backend, us, repeats});
        timing.measured_now = measured = true;
      } else {
        if (!stale) {
          report.notes.push_back(fmt::format("{} {}: no time in {} for this device and binary",
                                             timing.backend, bucket_key, path_));
        }
        complete = false;
        continue;
      }
      timing.median_us.emplace_back(bucket_key, us);
      timing.total_us += us;
    }
    if (complete) report.timings.push_back(std::move(timing));
  }
  if (measured) cache.save(path_);
  std::stable_sort(
      report.timings.begin(), report.timings.end(),
      [](const CandidateTiming& a, const CandidateTiming& b) { return a.total_us < b.total_us; });
}

nlohmann::json to_json(const TuningReport& report) {
  nlohmann::json timings = nlohmann::json::array();
  for (const CandidateTiming& t : report.timings) {
    nlohmann::json buckets = nlohmann::json::object();
    for (const auto& [bucket, us] : t.median_us) buckets[bucket] = us;
    timings.push_back({{"backend", t.backend},
                       {"median_us", buckets},
                       {"total_us", t.total_us},
                       {"measured_now", t.measured_now}});
  }
  return {
      {"phase", report.phase ? nlohmann::json(to_string(*report.phase)) : nlohmann::json(nullptr)},
      {"winner", report.winner ? nlohmann::json(*report.winner) : nlohmann::json(nullptr)},
      {"cache", report.cache_path},
      {"key", report.key},
      {"timings", timings},
      {"why", report.why},
      {"notes", report.notes}};
}

}  // namespace attnkit
