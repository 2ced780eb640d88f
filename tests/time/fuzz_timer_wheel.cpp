// tests/time/fuzz_timer_wheel.cpp — libFuzzer target for weft::detail::timer_wheel.
//
// Decodes the input into a wheel configuration (tick, origin) and a sequence
// of insert / remove / advance operations, callbacks that re-arm and cancel
// from inside advance included, and runs them against the wheel and against a
// std::multimap keyed by (deadline, arm sequence). Any difference in what is
// handed out, in which order, in size(), or a next_expiry() outside its stated
// bounds traps. Deadlines are drawn where wheels break: 0, the past, 64^k tick
// boundaries +-1, the end of the top level's turn, INT64_MAX.
//
// Build (one line; -Iinclude for <weft/detail/timer.hpp>, where timer_node lives):
//   clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address -Ilib -Itests -Iinclude
//   tests/time/fuzz_timer_wheel.cpp lib/time/timer_wheel.cpp -o /tmp/fz && /tmp/fz -max_total_time=30
// It is also a plain translation unit; with -DWEFT_FUZZ_MAIN it gets a main
// that replays the input files named on its command line.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "time/timer_wheel.hpp"
#include "wheel_reference.hpp"

namespace {

using weft::detail::timer_node;
using weft::detail::timer_wheel;

__extension__ typedef __int128 i128;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::size_t kNodes = 32;  // few nodes, so operations collide on them

#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "fuzz_timer_wheel: %s failed at line %d\n", #cond, __LINE__); \
      __builtin_trap();                                                                    \
    }                                                                                      \
  } while (0)

// Reads the input front to back; past its end every read yields zero.
class bytes {
 public:
  bytes(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
  bool done() const { return p_ == end_; }
  std::uint8_t u8() { return p_ == end_ ? 0 : *p_++; }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | u8();
    return v;
  }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

std::int64_t sat(i128 v) { return v > kMax ? kMax : v < kMin ? kMin : static_cast<std::int64_t>(v); }


class harness {
 public:
  harness(bytes& in, std::int64_t tick, std::int64_t origin)
      : in_(in), tick_(tick), origin_(origin), now_(origin), wheel_(std::chrono::nanoseconds(tick), origin) {}

  void run() {
    while (!in_.done()) {
      const std::uint8_t op = in_.u8();
      const std::size_t i = (op >> 3) % kNodes;
      switch (op & 7) {
        case 0:
        case 1:
        case 2: insert(i, deadline()); break;
        case 3: remove(i); break;
        case 4:
        case 5: advance(later()); break;
        case 6: {
          const auto next = wheel_.next_expiry();  // what a loop would sleep until
          advance(next ? *next : now_);
          break;
        }
        default:
          for (std::size_t j = 0; j < kNodes; ++j) FUZZ_CHECK(nodes_[j].armed() == ref_.where[j].has_value());
          break;
      }
      check_bounds();
    }
  }

 private:
  // A tick boundary 64^k ticks ahead of now, or the next one aligned to 64^k.
  std::int64_t boundary(unsigned k, bool aligned) const {
    const i128 since = (i128{now_} - origin_) / tick_;
    const i128 step = i128{1} << (6 * k);
    const i128 t = aligned ? (since / step + 1) * step : since + step;
    return sat(i128{origin_} + t * tick_);
  }

  // A value of any magnitude. Two reads in two statements: the operands of
  // >> are unsequenced, and an input must replay alike under every compiler.
  std::uint64_t scaled() {
    const std::uint64_t v = in_.u64();
    return v >> (in_.u8() % 64);
  }

  std::int64_t deadline() {
    const std::uint8_t sel = in_.u8();
    const std::int64_t small = static_cast<std::int64_t>(sel >> 6) - 1;  // -1, 0, 1, 2
    switch (sel & 7) {
      case 0: return static_cast<std::int64_t>(in_.u64());
      case 1: return sat(i128{now_} - scaled());
      case 2: return now_;
      case 3: {
        const std::uint8_t b = in_.u8();
        return sat(i128{boundary(1 + b % 8, b & 8)} + small * ((b & 16) ? tick_ : 1));
      }
      case 4: return kMax - in_.u8();
      case 5: return sat(i128{origin_} + (i128{1} << 48) * tick_ + small);
      case 6: return sat(i128{now_} + i128{in_.u8()} * tick_ + small);
      default: return sat(i128{now_} + scaled());
    }
  }

  std::int64_t later() {
    const std::uint8_t sel = in_.u8();
    switch (sel & 7) {
      case 0: return now_;
      case 1: return sat(i128{now_} + 1 + (sel >> 3));
      case 2: return sat(i128{now_} + i128{in_.u8()} * tick_ / 16);
      case 3: {
        const std::uint8_t b = in_.u8();
        return sat(i128{boundary(1 + b % 8, b & 8)} + static_cast<std::int64_t>(b >> 6) - 1);
      }
      case 4: return sat(i128{now_} + (i128{1} << 48) * tick_ * (1 + (sel >> 6)));  // past the top turn
      case 5: return sat(i128{now_} - in_.u8());  // an earlier time counts as now
      default: return sat(i128{now_} + scaled());
    }
  }

  void insert(std::size_t i, std::int64_t d) {
    wheel_.insert(&nodes_[i], d);
    ref_.insert(i, d);
    FUZZ_CHECK(nodes_[i].armed() && nodes_[i].deadline == d);
  }

  void remove(std::size_t i) {
    wheel_.remove(&nodes_[i]);
    ref_.remove(i);
    FUZZ_CHECK(!nodes_[i].armed());
  }

  void advance(std::int64_t target) {
    const std::int64_t now = target > now_ ? target : now_;
    const std::uint64_t boundary = ref_.seq;
    wheel_.advance(target, [&](timer_node* n) {
      FUZZ_CHECK(n >= nodes_ && n < nodes_ + kNodes);
      const std::size_t got = static_cast<std::size_t>(n - nodes_);
      const auto want = ref_.next_due(now, boundary);
      FUZZ_CHECK(want.has_value());
      FUZZ_CHECK(got == *want);
      FUZZ_CHECK(!n->armed() && n->deadline <= now);
      ref_.remove(got);
      const std::uint8_t act = in_.u8();
      switch (act & 3) {
        case 1: insert(got, deadline()); break;  // re-arm itself, maybe already due
        case 2: remove((act >> 2) % kNodes); break;
        case 3: insert((act >> 2) % kNodes, deadline()); break;
        default: break;
      }
    });
    now_ = now;
    FUZZ_CHECK(wheel_.now() == now_);
    FUZZ_CHECK(!ref_.next_due(now_, boundary).has_value());  // nothing due was left behind
  }

  void check_bounds() const {
    FUZZ_CHECK(wheel_.size() == ref_.armed.size());
    const auto next = wheel_.next_expiry();
    FUZZ_CHECK(next.has_value() == !ref_.armed.empty());
    if (!next) return;
    const std::int64_t earliest = ref_.armed.begin()->first.first;
    i128 bound = earliest;
    if (earliest > now_) {  // rounded up to the tick grid
      const i128 ticks = (i128{earliest} - origin_ + tick_ - 1) / tick_;
      bound = i128{origin_} + ticks * tick_;
      if (bound > kMax) bound = kMax;
    }
    FUZZ_CHECK(i128{*next} <= bound);                       // never later than the rounded-up earliest
    FUZZ_CHECK((*next <= now_) == (earliest <= now_));  // "due now" exactly when something is
  }

  bytes& in_;
  std::int64_t tick_;
  std::int64_t origin_;
  std::int64_t now_;
  timer_node nodes_[kNodes];  // before wheel_: the wheel is destroyed first and disarms them
  wheel_reference ref_{kNodes};
  timer_wheel wheel_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bytes in(data, size);
  static constexpr std::int64_t ticks[] = {1, 2, 7, 1000, 10'000, 1'000'000, 3'600'000'000'000};
  const std::int64_t tick = ticks[in.u8() % std::size(ticks)];
  std::int64_t origin = 0;
  switch (in.u8() % 5) {
    case 0: origin = 0; break;
    case 1: origin = 3'600'000'000'000; break;  // a steady clock an hour after boot
    case 2: origin = -5'000'000'007; break;
    case 3: origin = kMax - 1'000'000'000'000'000; break;
    default: origin = static_cast<std::int64_t>(in.u64() >> 2); break;
  }
  harness h(in, tick, origin);
  h.run();
  return 0;
}

#ifdef WEFT_FUZZ_MAIN
#include <fstream>
#include <iterator>
#include <vector>

int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a) {
    std::ifstream f(argv[a], std::ios::binary);
    std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(buf.data()), buf.size());
  }
  return 0;
}
#endif
