// weft/when_all.hpp — run tasks concurrently and wait for all of them, or the first.
//
// Each child runs as a context of its own (queued on the parent's loop, where
// an idle loop may steal it), so the children really run concurrently. The
// parent is woken once, when the last child has finished and no cancel
// delivery to any child is still in flight; so the children's frames and
// results, which live in the parent's frame, are never touched after it moves on.
//
// when_all: the first child to throw has its exception rethrown, after the
// others were cancelled and have stopped. when_any: the first child to finish
// wins (its value, or its exception rethrown); the rest are cancelled and
// have stopped before it returns. A parent cancelled while waiting cancels
// its children and stops once they are all gone. A child that stopped on its
// own (it threw weft::cancelled) counts as failed: `cancelled` is thrown.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <weft/detail/context.hpp>
#include <weft/detail/rooted_context.hpp>
#include <weft/errors.hpp>
#include <weft/outcome.hpp>
#include <weft/task.hpp>

namespace weft {

namespace detail {

template <class T>
using non_void_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// What the children of one when_all / when_any share with their parent.
struct child_group : cancel_hook {
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  task_context* parent = nullptr;
  std::vector<task_context*> members;
  std::atomic<std::size_t> remaining{0};
  // when_all: the first child to fail; when_any: the first child to finish.
  std::atomic<std::size_t> decided{none};
  bool first_finisher_wins = false;

  explicit child_group(std::size_t n) : members(n, nullptr) { on_cancel = &cancel_children; }

  static void cancel_children(cancel_hook* h) noexcept {
    auto* g = static_cast<child_group*>(h);
    for (task_context* c : g->members) request_cancel(c);
  }
  // A child's outcome is in place (the loop that ran the child's end).
  void child_outcome(std::size_t index, bool failed) noexcept {
    if (!failed && !first_finisher_wins) return;
    // relaxed: a look before the CAS, so that the losers of a when_any (or
    // the later failures of a when_all) do not all write the shared line.
    if (decided.load(std::memory_order_relaxed) != none) return;
    std::size_t expected = none;
    // acq_rel: the parent reads `decided` after the wake, which already orders it;
    // this only has to pick one winner among children on different loops.
    if (decided.compare_exchange_strong(expected, index, std::memory_order_acq_rel)) {
      for (std::size_t i = 0; i < members.size(); ++i)
        if (i != index) request_cancel(members[i]);
    }
  }
  // A child finished and nothing is in flight to it (the loop that ran the child's end).
  void child_quiesced() noexcept {
    // acq_rel: the last child must see the others' outcomes before waking the parent.
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) wake(parent);
  }

  // await_suspend: a parent already cancelled stops without starting them.
  bool start(std::coroutine_handle<> h) {
    parent = current_context();
    if (parent == nullptr) throw std::logic_error("weft: when_all/when_any awaited outside a weft task");
    if (stop_if_cancelled(parent, h)) return true;
    remaining.store(members.size(), std::memory_order_relaxed);
    parent->resume_point = h;
    parent->hook = this;
    for (task_context* c : members) start_on_current_loop(c);
    return true;
  }
};

template <class T>
struct child_context final : rooted_context<T> {
  child_group* group;
  std::size_t index;
  child_context(task<T>&& t, child_group* g, std::size_t i) noexcept
      : rooted_context<T>(std::move(t)), group(g), index(i) {
    this->on_outcome = [](root_holder<T>* c) noexcept {
      auto* self = static_cast<child_context*>(c);
      self->group->child_outcome(self->index, !self->result.has_value());
    };
    this->quiesced = [](task_context* c) noexcept {
      static_cast<child_context*>(c)->group->child_quiesced();
    };
  }
};

template <class T>
std::unique_ptr<child_context<T>> make_child(task<T>&& t, child_group& g, std::size_t i) {
  if (!t) throw std::invalid_argument("weft: when_all/when_any given an empty task");
  auto c = std::make_unique<child_context<T>>(std::move(t), &g, i);
  g.members[i] = c.get();  // by index: tuple elements are built in no fixed order
  return c;
}

// The child's value, or its ending rethrown (cancelled when it stopped).
template <class T>
non_void_t<T> take_value(child_context<T>& c) {
  if constexpr (std::is_void_v<T>) {
    outcome_access::take(c.result);
    return std::monostate{};
  } else {
    return outcome_access::take(c.result);
  }
}

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

}  // namespace detail

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
