// weft/yield.hpp — yield(): let the rest of the loop run.
//
// The task goes to the back of its loop's run queue, and runs again only
// after the loop has looked at its timers and io_uring completions once: a
// task that yields in a loop cannot starve a timer, and a deadline that
// passed while it computed is noticed at its yield. Like any runnable task,
// it may be taken by an idle loop meanwhile (detail/context.hpp). yield is a
// cancellation point: a task cancelled before or while it yields stops there
// (cancel.hpp).
#pragma once

#include <weft/detail/yield_awaiter.hpp>
#include <weft/errors.hpp>

namespace weft {

// co_await yield(). std::logic_error outside a weft task.
[[nodiscard]] inline detail::yield_awaiter yield() noexcept { return {}; }

}  // namespace weft
