// weft/detail/thread_state.hpp — what weft knows of the calling thread.
//
// One thread-local (this_thread(), lib/core/context.cpp) per thread: the loop it
// runs if any, the context being run, the driver that turns coroutine
// transfers into a loop (so a chain of a million nested awaits runs in
// constant stack), and the thread's small-block pool. It is weft's only
// global state besides what a runtime owns.
#pragma once

#include <atomic>
#include <coroutine>

namespace weft::detail {

class loop;  // lib/core/loop.hpp
struct task_context;

// The trampoline that turns coroutine-to-coroutine transfers into a loop
// (drive, below): where the coroutine being resumed leaves the next one.
struct driver {
  std::coroutine_handle<> next;
};

struct block_heap;  // lib/core/block_pool.cpp

// The thread's view of weft.
struct thread_state {
  loop* current_loop = nullptr;
  // The running loop's stop flag (set with current_loop), so that the
  // protocol reads "is this loop stopping" without a call into the loop.
  const std::atomic<bool>* loop_stopping = nullptr;
  task_context* current = nullptr;
  driver* active = nullptr;
  // The context being run finished during its run and may be gone: the loop
  // must not touch it again (set by the strand's end, read by run_context).
  bool current_ended = false;
  // This thread's small-block pool (detail/block_pool.hpp), made on first use
  // and retired when the thread exits.
  block_heap* heap = nullptr;
  bool heap_retired = false;
  thread_state() = default;
  thread_state(const thread_state&) = delete;
  thread_state& operator=(const thread_state&) = delete;
  ~thread_state();
};
[[gnu::noinline]] thread_state& this_thread() noexcept;  // see lib/core/context.cpp

inline task_context* current_context() noexcept { return this_thread().current; }

// Hand control to `next` from an await_suspend. Under a driver the transfer
// goes back through the driver's loop, so a chain of a million nested awaits
// uses constant stack whether or not the compiler emits the tail call that
// symmetric transfer relies on (GCC does not at -O0 or under sanitizers).
// Outside a driver (a foreign coroutine awaiting a weft task) it is plain
// symmetric transfer.
inline std::coroutine_handle<> transfer(thread_state& ts, std::coroutine_handle<> next) noexcept {
  if (driver* d = ts.active) {
    d->next = next;
    return std::noop_coroutine();
  }
  return next;
}
inline std::coroutine_handle<> transfer(std::coroutine_handle<> next) noexcept {
  return transfer(this_thread(), next);
}

// Resume `h` and everything it transfers to, until the chain parks.
void drive(std::coroutine_handle<> h) noexcept;

}  // namespace weft::detail
