// weft/detail/child_awaiters.hpp — what when_all and when_any co_await:
// all_of_awaiter for a pack of tasks (when_all(task<Ts>...)), and
// vector_awaiter for a vector of them, whose children live in one
// child_array. Each starts its children in await_suspend and is resumed once
// they have all quiesced (detail/child_group.hpp); reading the results is
// left to the caller.
#pragma once

#include <coroutine>
#include <cstddef>
#include <memory>
#include <new>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include <weft/detail/child_group.hpp>
#include <weft/task.hpp>

namespace weft::detail {

template <class... Ts>
struct all_of_awaiter {
  child_group group;
  std::tuple<std::unique_ptr<child_context<Ts>>...> children;

  explicit all_of_awaiter(task<Ts>&&... ts) : all_of_awaiter(std::index_sequence_for<Ts...>{}, std::move(ts)...) {}
  template <std::size_t... Is>
  all_of_awaiter(std::index_sequence<Is...>, task<Ts>&&... ts)
      : group(sizeof...(Ts)), children(make_child(std::move(ts), group, Is)...) {}

  bool await_ready() const noexcept { return sizeof...(Ts) == 0; }
  bool await_suspend(std::coroutine_handle<> h) { return group.start(h); }
  std::tuple<non_void_t<Ts>...> await_resume() {
    std::size_t failed = group.decided.load(std::memory_order_acquire);
    if (failed != child_group::none) rethrow_ending(failed);
    return std::apply([](auto&... c) { return std::tuple<non_void_t<Ts>...>(take_value(*c)...); }, children);
  }
  // Throws what child `index` ended with: its exception, or cancelled.
  void rethrow_ending(std::size_t index) {
    std::size_t i = 0;
    std::apply([&](auto&... c) { ((i++ == index ? (take_value(*c), 0) : 0), ...); }, children);
  }
};

// The children of a vector when_all / when_any in one allocation rather
// than one each: a child is a context that others point at, so each is built
// in place and never moved.
template <class T>
class child_array {
 public:
  // std::invalid_argument (and nothing built) if any task is empty.
  child_array(std::vector<task<T>>&& ts, child_group& g) {
    for (const task<T>& t : ts)
      if (!t) throw std::invalid_argument("weft: when_all/when_any given an empty task");
    if (ts.empty()) return;
    p_ = static_cast<child_context<T>*>(
        ::operator new(ts.size() * sizeof(child_context<T>), std::align_val_t{alignof(child_context<T>)}));
    for (; n_ < ts.size(); ++n_) {
      ::new (static_cast<void*>(p_ + n_)) child_context<T>(std::move(ts[n_]), &g, n_);  // noexcept
      g.members[n_] = p_ + n_;
    }
  }
  child_array(const child_array&) = delete;
  child_array& operator=(const child_array&) = delete;
  ~child_array() {
    if (p_ == nullptr) return;
    for (std::size_t i = 0; i < n_; ++i) p_[i].~child_context<T>();
    ::operator delete(p_, std::align_val_t{alignof(child_context<T>)});
  }

  std::size_t size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  child_context<T>& operator[](std::size_t i) noexcept { return p_[i]; }
  child_context<T>* begin() noexcept { return p_; }
  child_context<T>* end() noexcept { return p_ + n_; }

 private:
  child_context<T>* p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T>
struct vector_awaiter {
  child_group group;
  child_array<T> children;

  vector_awaiter(std::vector<task<T>>&& ts, bool first_wins) : group(ts.size()), children(std::move(ts), group) {
    group.first_finisher_wins = first_wins;
  }
  bool await_ready() const noexcept { return children.empty(); }
  bool await_suspend(std::coroutine_handle<> h) { return group.start(h); }
  void await_resume() const noexcept {}
};

}  // namespace weft::detail
