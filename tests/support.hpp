// tests/support.hpp — small helpers the test files share: a runtime of n
// loops, a generous "did not hang" wait, and joining a handle that should end
// cancelled.
#pragma once

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <weft/errors.hpp>
#include <weft/join_handle.hpp>
#include <weft/runtime.hpp>
#include <weft/task.hpp>
#include <weft/yield.hpp>

namespace test {

inline weft::runtime_options loops(unsigned n, std::chrono::nanoseconds tick = std::chrono::milliseconds(1)) {
  weft::runtime_options o;
  o.loops = n;
  o.timer_tick = tick;
  return o;
}

// The bound for "this did not hang": the machines are shared and noisy, so
// tests never assert tighter upper bounds on time than this.
inline constexpr auto generous = std::chrono::seconds(10);

// Polls `done` from a plain thread until it holds or `limit` has passed;
// returns whether it held.
template <class Pred>
bool eventually(Pred done, std::chrono::steady_clock::duration limit = generous) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// The same from inside a task: yields until pred() holds; false if it did
// not within `generous`.
template <class Pred>
weft::task<bool> until(Pred done) {
  const auto give_up = std::chrono::steady_clock::now() + generous;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) co_return false;
    co_await weft::yield();
  }
  co_return true;
}

// Detects two holders of something exclusive at once.
struct exclusive {
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  void enter() {
    if (inside.fetch_add(1) != 0) overlapped = true;
  }
  void leave() { inside.fetch_sub(1); }
};

// Waits from a plain thread until `done` holds, and throws (failing the test
// with `what`, rather than hanging it) if it does not within `limit`.
template <class Pred>
void wait_for(Pred done, const char* what, std::chrono::steady_clock::duration limit = generous) {
  if (!eventually(done, limit)) throw std::runtime_error(std::string("gave up waiting: ") + what);
}

// Joins h from a plain thread; true when the task ended with weft::cancelled.
template <class T>
bool finishes_cancelled(weft::join_handle<T>& h) {
  try {
    h.join_blocking();
  } catch (const weft::cancelled&) {
    return true;
  }
  return false;
}

// Joins h from a plain thread and says how the task ended: "value",
// "cancelled", or the error's kind and message.
template <class T>
std::string outcome_of(weft::join_handle<T>& h) {
  try {
    h.join_blocking();
    return "value";
  } catch (const weft::cancelled&) {
    return "cancelled";
  } catch (const weft::too_many_tasks& e) {
    return std::string("too_many_tasks: ") + e.what();
  } catch (const weft::rejected_execution& e) {
    return std::string("rejected: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

// Awaits h from a task; true when the task ended with weft::cancelled.
template <class T>
weft::task<bool> ends_cancelled(weft::join_handle<T>& h) {
  try {
    co_await h;
  } catch (const weft::cancelled&) {
    co_return true;
  }
  co_return false;
}

}  // namespace test
