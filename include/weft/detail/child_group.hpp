// weft/detail/child_group.hpp — the children of one when_all / when_any:
// the group they share with their parent, and the context each runs as.
//
// Each child runs as a context of its own (queued on the parent's loop, where
// an idle loop may steal it), so the children really run concurrently. The
// parent is woken once, when the last child has finished and no cancel
// delivery to any child is still in flight; so the children's frames and
// results, which live in the parent's frame, are never touched after it moves on.
//
// A child reports to the group twice, on the loop that ran its end: its
// outcome (child_outcome: the first failure of a when_all, or the first
// finisher of a when_any, is `decided` and cancels the others) and then its
// quiescence (child_quiesced: the last one wakes the parent). A parent
// cancelled while it waits has its hook cancel every child.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <weft/detail/context.hpp>
#include <weft/detail/rooted_context.hpp>
#include <weft/outcome.hpp>
#include <weft/task.hpp>

namespace weft::detail {

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

}  // namespace weft::detail
