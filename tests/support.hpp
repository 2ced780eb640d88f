// tests/support.hpp — small helpers the test files share: a runtime of n
// loops, a generous "did not hang" wait, and joining a handle that should end
// cancelled.
#pragma once

#include <chrono>
#include <thread>

#include <weft/errors.hpp>
#include <weft/join_handle.hpp>
#include <weft/runtime.hpp>

namespace test {

inline weft::runtime_options loops(unsigned n) {
  weft::runtime_options o;
  o.loops = n;
  return o;
}

// The bound for "this did not hang": the machines are shared and noisy, so
// tests never assert tighter upper bounds on time than this.
inline constexpr auto generous = std::chrono::seconds(10);

// Polls `done` until it holds or `generous` has passed; returns whether it held.
template <class Pred>
bool eventually(Pred done) {
  const auto until = std::chrono::steady_clock::now() + generous;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
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

}  // namespace test
