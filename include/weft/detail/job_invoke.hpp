// weft/detail/job_invoke.hpp — what a pool job may be, and calling it.
//
// A job is any move-constructible callable taking nothing or a
// std::stop_token (which is then the pool's or its awaiter's stop request).
// capture_job runs one and keeps its value or exception in an outcome
// (weft/outcome.hpp), never letting an exception escape.
#pragma once

#include <weft/outcome.hpp>

#include <concepts>
#include <exception>
#include <stop_token>
#include <type_traits>
#include <utility>

namespace weft::detail {

template <class F>
inline constexpr bool takes_stop_token = std::is_invocable_v<F&, std::stop_token>;

template <class F>
struct job_result {
  using type = std::invoke_result_t<F&>;
};
template <class F>
  requires takes_stop_token<F>
struct job_result<F> {
  using type = std::invoke_result_t<F&, std::stop_token>;
};
template <class F>
using job_result_t = typename job_result<F>::type;

template <class F>
concept job_callable = std::move_constructible<std::decay_t<F>> &&
                       (std::is_invocable_v<std::decay_t<F>&> || takes_stop_token<std::decay_t<F>>);

template <class F>
decltype(auto) invoke_job(F& fn, std::stop_token st) {
  if constexpr (takes_stop_token<F>) {
    return fn(std::move(st));
  } else {
    return fn();
  }
}

// Runs a job and keeps its value or exception in `out`.
template <class R, class F>
void capture_job(outcome<R>& out, F& fn, std::stop_token st) noexcept {
  static_assert(!std::is_reference_v<R>, "weft: a job must return by value, not a reference");
  try {
    if constexpr (std::is_void_v<R>) {
      invoke_job(fn, std::move(st));
      outcome_access::set_value(out);
    } else {
      outcome_access::set_value(out, invoke_job(fn, std::move(st)));
    }
  } catch (...) {
    outcome_access::set_error(out, std::current_exception());
  }
}

}  // namespace weft::detail
