// weft/detail/shield_scope.hpp — what shielded() (cancel.hpp) is made of:
// a scope that holds off cancellation of the current strand while it lives,
// and the coroutine that runs a task inside one.
//
// The shield is a count on the strand's context (context.hpp: `shield`),
// touched only by whoever runs the strand; while it is non-zero a cancel
// request stays pending in the context's flags and takes effect at the
// first suspension point after the shield.
#pragma once

#include <utility>

#include <weft/detail/context.hpp>
#include <weft/task.hpp>

namespace weft::detail {

// Holds off cancellation of the current strand while it lives (context.hpp:
// `shield`). Lives in a shielded() frame, which runs on its strand's loop.
class shield_scope {
 public:
  shield_scope() noexcept : ctx_(current_context()) {
    if (ctx_ != nullptr) ++ctx_->shield;
  }
  ~shield_scope() {
    if (ctx_ != nullptr) --ctx_->shield;
  }
  shield_scope(const shield_scope&) = delete;
  shield_scope& operator=(const shield_scope&) = delete;

 private:
  task_context* ctx_;
};

template <class T>
task<T> run_shielded(task<T> t) {
  shield_scope shield;
  co_return co_await std::move(t);
}

}  // namespace weft::detail
