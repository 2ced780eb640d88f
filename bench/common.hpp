// bench/common.hpp — plumbing every benchmark program shares, weft's and
// Asio's alike: `--n N` to scale a run down, a monotonic clock, nearest-rank
// percentiles, peak RSS, the failed-check exit, and the one-line JSON report
// that bench/run reads from each program's last line.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace bench {

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A benchmark that cannot fail its own check measures nothing: a failed check
// exits 1, and the harness reports the row as FAILED.
[[noreturn]] inline void fail(const char* system, const char* workload, const std::string& why) {
  std::fprintf(stderr, "%s %s: check failed: %s\n", system, workload, why.c_str());
  std::exit(1);
}

// `--n N` (or `--n=N`) replaces the workload's main size, for smoke runs.
inline std::size_t parse_n(int argc, char** argv, std::size_t default_n) {
  std::size_t n = default_n;
  for (int i = 1; i < argc; ++i) {
    const char* value = nullptr;
    if (std::strcmp(argv[i], "--n") == 0 && i + 1 < argc) value = argv[++i];
    else if (std::strncmp(argv[i], "--n=", 4) == 0) value = argv[i] + 4;
    else {
      std::fprintf(stderr, "usage: %s [--n N]   (default N = %zu)\n", argv[0], default_n);
      std::exit(2);
    }
    char* end = nullptr;
    unsigned long long parsed = std::strtoull(value, &end, 10);
    if (end == value || *end != '\0' || parsed == 0) {
      std::fprintf(stderr, "%s: --n wants a positive integer, got '%s'\n", argv[0], value);
      std::exit(2);
    }
    n = static_cast<std::size_t>(parsed);
  }
  return n;
}

// Nearest-rank percentile (p in [0, 100]); reorders `samples`. Nearest-rank,
// so every figure reported is a value some task actually observed.
template <class T>
T percentile(std::vector<T>& samples, double p) {
  if (samples.empty()) return T{};
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  std::size_t idx = rank == 0 ? 0 : std::min(rank - 1, samples.size() - 1);
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(idx), samples.end());
  return samples[idx];
}

// Peak resident set size so far (VmHWM), KiB; 0 without /proc.
inline long peak_rss_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

// The single JSON object a program prints last. Keys are our own
// identifiers, so nothing needs escaping.
class json_line {
 public:
  json_line(const char* system, const char* workload) {
    body_ = std::string("{\"system\":\"") + system + "\",\"workload\":\"" + workload + '"';
  }
  json_line& num(const char* key, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", std::isfinite(v) ? v : 0.0);
    return raw(key, buf);
  }
  json_line& integer(const char* key, long long v) { return raw(key, std::to_string(v)); }
  json_line& boolean(const char* key, bool v) { return raw(key, v ? "true" : "false"); }
  // Whatever went to stderr first, so the JSON object really is the last line.
  void print() const {
    std::fflush(stderr);
    std::printf("%s}\n", body_.c_str());
    std::fflush(stdout);
  }

 private:
  json_line& raw(const char* key, const std::string& v) {
    body_ += std::string(",\"") + key + "\":" + v;
    return *this;
  }
  std::string body_;
};

// W7's figures, computed the same way for both sides: from each pinger's
// largest gap and round count and from every sleeper wake's lateness (all
// in ns). Fails the check (as `system`) if a sleeper woke early.
struct w7_pinger {
  std::int64_t max_gap = 0;
  long rounds = 0;
};
inline void print_w7(const char* system, const std::vector<w7_pinger>& pings,
                     const std::vector<std::vector<std::int64_t>>& lates) {
  std::vector<double> gaps_us;
  long rounds = 0;
  for (const auto& x : pings) {
    gaps_us.push_back(static_cast<double>(x.max_gap) / 1e3);
    rounds += x.rounds;
  }
  std::vector<double> late_us;
  for (const auto& v : lates)
    for (std::int64_t l : v) {
      if (l < 0) fail(system, "W7", "a sleeper woke " + std::to_string(-l) + " ns early");
      late_us.push_back(static_cast<double>(l) / 1e3);
    }
  json_line(system, "W7")
      .num("yield_gap_p99_us", percentile(gaps_us, 99))
      .num("sleep_late_p99_us", percentile(late_us, 99))
      .num("rounds", static_cast<double>(rounds))
      .print();
}

}  // namespace bench
