// weft/when_all.hpp — run tasks concurrently and wait for all of them, or the first.
//
// when_all: the first child to throw has its exception rethrown, after the
// others were cancelled and have stopped. when_any: the first child to finish
// wins (its value, or its exception rethrown); the rest are cancelled and
// have stopped before it returns. A parent cancelled while waiting cancels
// its children and stops once they are all gone. A child that stopped on its
// own (it threw weft::cancelled) counts as failed: `cancelled` is thrown.
//
// Each child runs as a task of its own, so the children really run
// concurrently (detail/child_group.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <weft/detail/child_awaiters.hpp>
#include <weft/detail/child_group.hpp>
#include <weft/task.hpp>

namespace weft {

// Runs every task concurrently; yields their results in order (void → std::monostate).
template <class... Ts>
task<std::tuple<detail::non_void_t<Ts>...>> when_all(task<Ts>... ts) {
  detail::all_of_awaiter<Ts...> all(std::move(ts)...);
  co_return co_await all;
}

template <class T>
task<std::vector<detail::non_void_t<T>>> when_all(std::vector<task<T>> ts) {
  detail::vector_awaiter<T> all(std::move(ts), false);
  co_await all;
  std::size_t failed = all.group.decided.load(std::memory_order_acquire);
  if (failed != detail::child_group::none) detail::take_value(all.children[failed]);  // throws
  std::vector<detail::non_void_t<T>> out;
  out.reserve(all.children.size());
  for (auto& c : all.children) out.push_back(detail::take_value(c));
  co_return out;
}

// The first task to finish wins: yields (its index, its value), or rethrows
// what it threw. The others are cancelled and awaited first.
template <class T>
task<std::pair<std::size_t, detail::non_void_t<T>>> when_any(std::vector<task<T>> ts) {
  if (ts.empty()) throw std::invalid_argument("weft: when_any of no tasks has no first to finish; pass at least one");
  detail::vector_awaiter<T> any(std::move(ts), true);
  co_await any;
  // Every child finished, so one won (a parent cancelled meanwhile never
  // gets here: it stops).
  std::size_t winner = any.group.decided.load(std::memory_order_acquire);
  co_return std::pair<std::size_t, detail::non_void_t<T>>(winner, detail::take_value(any.children[winner]));
}

}  // namespace weft
