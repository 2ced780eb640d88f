// weft/detail/promise_node.hpp — the node of a bounded_elastic::submit():
// the callable and the std::promise behind the caller's future.
//
// The outcome is kept until finish, so that the pool's figures are updated
// before the future becomes ready; a dropped node sets rejected_execution,
// so the future never waits for ever.
#pragma once

#include <weft/detail/job_invoke.hpp>
#include <weft/detail/job_node.hpp>
#include <weft/errors.hpp>
#include <weft/outcome.hpp>

#include <exception>
#include <future>
#include <stop_token>
#include <type_traits>
#include <utility>

namespace weft::detail {

template <class F, class R>
struct promise_node final : job_node {
  F fn;
  std::promise<R> promise;
  outcome<R> out;

  explicit promise_node(F f) : fn(std::move(f)) { ops = &table; }
  static void run(job_node* n, std::stop_token st) noexcept {
    auto* self = static_cast<promise_node*>(n);
    capture_job(self->out, self->fn, std::move(st));
  }
  static std::exception_ptr finish(job_node* n) noexcept {
    auto* self = static_cast<promise_node*>(n);
    try {
      if (std::exception_ptr e = self->out.error()) {
        self->promise.set_exception(std::move(e));
      } else if constexpr (std::is_void_v<R>) {
        self->promise.set_value();
      } else {
        self->promise.set_value(outcome_access::take(self->out));
      }
    } catch (...) {
      // set_value can only fail if R's move throws; the future then carries that.
      self->promise.set_exception(std::current_exception());
    }
    delete self;
    return nullptr;
  }
  static void drop(job_node* n, const char* why) noexcept {
    auto* self = static_cast<promise_node*>(n);
    self->promise.set_exception(std::make_exception_ptr(rejected_execution(why)));
    delete self;
  }
  static constexpr job_ops table{&run, &finish, &drop};
};

}  // namespace weft::detail
