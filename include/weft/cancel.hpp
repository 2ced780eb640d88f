// weft/cancel.hpp — cancellation as seen from inside a task, and shielded().
//
// Cancellation in weft is cooperative, always delivered, and a completion of
// its own, not an exception. Every weft suspension point (sleep, interval
// tick, offload, join, lock acquire, coordinator execute, yield, when_all,
// timeout) is a cancellation point: a task asked to stop *stops* there —
// within one loop turn if it was already suspended, at its next suspension
// point if it was running. Stopping destroys the task's coroutine frames from
// the innermost outwards: destructors run (guards unlock, RAII releases), catch
// blocks do not, so no `catch (...)` can swallow a cancellation. What the task
// waited on is released first (the timer disarmed, the lock or coordinator
// queue left, a running offloaded job awaited). Whoever awaits a stopped task
// sees "stopped": `co_await h` throws weft::cancelled, `co_await h.outcome()`
// yields an outcome whose stopped() is true. A stopped detached task is not
// an error for on_error. It is std::execution's set_stopped and Tokio's drop.
//
//   auto h = weft::spawn(work());
//   h.cancel();
//   weft::outcome<int> o = co_await h.outcome();   // o.stopped()
//
// A task body that throws weft::cancelled itself also ends stopped.
#pragma once

#include <stdexcept>
#include <utility>

#include <weft/detail/shield_scope.hpp>
#include <weft/task.hpp>

namespace weft {

namespace this_task {

// True once the running task has been asked to stop (join_handle::cancel, an
// enclosing timeout or when_all, a lease expiry, runtime shutdown), so that a
// long computation between suspension points can end early. False off a loop
// thread, and inside shielded().
bool is_cancelled() noexcept;

}  // namespace this_task

// Runs t to its end even if the enclosing task is cancelled meanwhile (async
// cleanup, like Kotlin's withContext(NonCancellable)); the cancellation takes
// effect at the first suspension point after it. Inside t, suspension points
// do not stop and this_task::is_cancelled() is false. t's children (when_all,
// timeout) are shielded with it; a timeout inside t still fires.
// std::invalid_argument for an empty task.
template <class T>
task<T> shielded(task<T> t) {
  if (!t) throw std::invalid_argument("weft: shielded() given an empty task (moved from or already awaited)");
  return detail::run_shielded(std::move(t));
}

}  // namespace weft
