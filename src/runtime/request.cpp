#include "attnkit/runtime/request.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

#include "attnkit/core/error.h"
#include "runtime/counter_hash.h"

namespace attnkit {
namespace {

void require_option(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorCode::kInvalidArgument, message);
}

// A uniform integer in [lo, hi] from the workload seed and a draw index.
int draw(uint64_t seed, uint64_t stream, uint64_t index, int lo, int hi) {
  if (hi <= lo) return lo;
  const uint64_t h = counter_hash({seed, stream, index});
  return lo + static_cast<int>(h % static_cast<uint64_t>(hi - lo + 1));
}

}  // namespace

std::vector<RequestSpec> make_workload(const WorkloadOptions& o) {
  require_option(o.num_requests >= 1,
                 fmt::format("number of requests {} must be at least 1", o.num_requests));
  require_option(o.min_prompt_len >= 1 && o.max_prompt_len >= o.min_prompt_len,
                 fmt::format("prompt length range {}:{} must satisfy 1 <= MIN <= MAX",
                             o.min_prompt_len, o.max_prompt_len));
  require_option(o.output_len >= 1,
                 fmt::format("output length {} must be at least 1", o.output_len));
  require_option(o.arrival_interval >= 0,
                 fmt::format("arrival interval {} must not be negative", o.arrival_interval));
  require_option(o.min_encoder_len >= 0 && o.max_encoder_len >= o.min_encoder_len,
                 fmt::format("encoder length range {}:{} must satisfy 0 <= MIN <= MAX",
                             o.min_encoder_len, o.max_encoder_len));
  require_option(o.num_requests <= kMaxWorkloadRequests,
                 fmt::format("number of requests {} exceeds the bound {}", o.num_requests,
                             kMaxWorkloadRequests));
  require_option(int64_t{o.max_prompt_len} + o.output_len <= kMaxRequestTokens,
                 fmt::format("prompt length {} + output length {} exceed the {} tokens a "
                             "request may hold",
                             o.max_prompt_len, o.output_len, kMaxRequestTokens));
  require_option(
      o.max_encoder_len <= kMaxRequestTokens,
      fmt::format("encoder length {} exceeds the bound {}", o.max_encoder_len, kMaxRequestTokens));
  require_option(
      int64_t{o.num_requests - 1} * o.arrival_interval <= std::numeric_limits<int>::max(),
      fmt::format("arrival interval {} x {} requests puts the last arrival at step "
                  "{}, beyond the last step {}",
                  o.arrival_interval, o.num_requests,
                  int64_t{o.num_requests - 1} * o.arrival_interval,
                  std::numeric_limits<int>::max()));
  std::vector<RequestSpec> requests;
  requests.reserve(static_cast<size_t>(o.num_requests));
  for (int i = 0; i < o.num_requests; ++i) {
    RequestSpec r;
    r.id = i;
    r.prompt_len = draw(o.seed, 1, static_cast<uint64_t>(i), o.min_prompt_len, o.max_prompt_len);
    r.output_len = o.output_len;
    r.arrival_step = i * o.arrival_interval;
    r.encoder_len = draw(o.seed, 2, static_cast<uint64_t>(i), o.min_encoder_len, o.max_encoder_len);
    requests.push_back(r);
  }
  return requests;
}

std::pair<int, int> parse_length_range(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{} '{}' is not a length or range: expected N or MIN:MAX with "
                             "1 <= MIN <= MAX (e.g. 32:128)",
                             what, text));
  };
  const auto parse_int = [&](std::string_view part) {
    int value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec != std::errc() || end != part.data() + part.size() || part.empty()) throw bad();
    return value;
  };
  const size_t colon = text.find(':');
  const std::string_view all(text);
  const int lo = parse_int(colon == std::string::npos ? all : all.substr(0, colon));
  const int hi = colon == std::string::npos ? lo : parse_int(all.substr(colon + 1));
  if (lo < 1 || hi < lo) throw bad();
  return {lo, hi};
}

}  // namespace attnkit
