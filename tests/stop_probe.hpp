// tests/stop_probe.hpp — watching a task stop from the inside.
//
// A stopped task's catch blocks never run (weft/cancel.hpp); its destructors
// do. So the tests observe a stop with an object whose destructor records
// what the task had done by the time its frame went.
#pragma once

#include <atomic>
#include <utility>

namespace test {

// Built with a sanitizer: frames are several times larger and slower to make,
// so the deepest tests scale down (still far past what recursion survives).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

// Runs `f` when the scope ends, however it ends (returned, threw, stopped).
template <class F>
class at_exit {
 public:
  explicit at_exit(F f) : f_(std::move(f)) {}
  at_exit(const at_exit&) = delete;
  at_exit& operator=(const at_exit&) = delete;
  ~at_exit() { f_(); }

 private:
  F f_;
};

// Sets `stopped` if its scope ends before pass() was called: a frame that
// goes while parked at the watched suspension point has stopped there.
class stop_mark {
 public:
  explicit stop_mark(std::atomic<bool>& stopped) noexcept : stopped_(stopped) {}
  stop_mark(const stop_mark&) = delete;
  stop_mark& operator=(const stop_mark&) = delete;
  ~stop_mark() {
    if (!passed_) stopped_ = true;
  }
  void pass() noexcept { passed_ = true; }

 private:
  std::atomic<bool>& stopped_;
  bool passed_ = false;
};

}  // namespace test
