// weft/detail/coordinated_result.hpp — what a coordinator job is and what
// execute() returns for it: a callable returning task<R> is a coroutine job,
// run inside the caller's task, and execute() yields R; any other job is a
// blocking one, run through offload, and execute() yields what it returns.
// Pure type traits, settled at compile time.
#pragma once

#include <type_traits>

#include <weft/bounded_elastic.hpp>
#include <weft/task.hpp>

namespace weft::detail {

// R for task<R>; no `type` for anything else.
template <class T>
struct task_value {};
template <class T>
struct task_value<task<T>> {
  using type = T;
};

// F returns a task<R>: the job is that coroutine, run in the caller's task.
template <class F>
concept coroutine_job = std::is_invocable_v<F&> &&
                        requires { typename task_value<std::remove_cvref_t<std::invoke_result_t<F&>>>::type; };

template <class F>
struct coordinated_result {
  using type = job_result_t<F>;  // a blocking job: what it returns
};
template <coroutine_job F>
struct coordinated_result<F> {
  using type = typename task_value<std::remove_cvref_t<std::invoke_result_t<F&>>>::type;
};
template <class F>
using coordinated_result_t = typename coordinated_result<F>::type;

}  // namespace weft::detail
