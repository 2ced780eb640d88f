// weft/cancel.hpp — observing cancellation from inside a task.
//
// Cancellation in weft is cooperative and always delivered: every weft
// suspension point (sleep, interval tick, offload, join, lock acquire,
// coordinator execute, yield) throws weft::cancelled once the task has been
// asked to stop, and a task already suspended in one is woken within one loop
// turn. Code that computes for a long time between suspension points can ask.
#pragma once

namespace weft::this_task {

// True once the running task has been asked to stop (join_handle::cancel, an
// enclosing timeout or when_all, a lease expiry, runtime shutdown). False off
// a loop thread.
bool is_cancelled() noexcept;

}  // namespace weft::this_task
