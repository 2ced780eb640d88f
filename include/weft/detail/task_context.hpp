// weft/detail/task_context.hpp — the state of one strand of execution.
//
// A task_context is what a loop queues and runs: a spawned task, or a child
// of when_all, when_any or timeout. Its `flags` word (states written next to
// it) is the one atomic that settles every race between the loops, wakers
// and cancellers touching it; the rest belongs to whoever runs it. The
// protocol that moves it between states is in detail/context.hpp (ground
// rules) and lib/core/context.cpp.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>

#include <weft/detail/sched_node.hpp>

namespace weft::detail {

class loop;           // lib/core/loop.hpp
struct promise_base;  // detail/task_promise.hpp

// What a suspended task is parked on. The loop that runs a context cancelled
// while parked calls on_cancel (any loop of the runtime); the hook unparks it
// and decides when to wake it (at once, or after something it must wait for,
// such as a running job), agreeing with the event on who wakes.
struct cancel_hook {
  void (*on_cancel)(cancel_hook*) noexcept = nullptr;
};

struct task_context : sched_node {
  // flags: the context's state, one atomic word.
  //   cancel_bit   cancellation requested (sticky)
  //   done_bit     the strand finished; nothing queues or runs it again
  //   queued_bit   it sits in a run queue; whoever pops it runs it
  //   running_bit  a loop is running it (claimed, resumed, or handing it
  //                cancellation)
  //   woken_bit    the wait of its current suspension is over (a wake came,
  //                or it asked to be run again: yield, a cancelled point)
  // Parked: none of queued, running, done. wake() and request_cancel() move a
  // parked context to queued and push it; while queued or running they only
  // record their bit, and the run's end re-queues a context woken meanwhile.
  static constexpr std::uint32_t cancel_bit = 1u << 0;
  static constexpr std::uint32_t done_bit = 1u << 1;
  static constexpr std::uint32_t queued_bit = 1u << 2;
  static constexpr std::uint32_t running_bit = 1u << 3;
  static constexpr std::uint32_t woken_bit = 1u << 4;
  std::atomic<std::uint32_t> flags{0};
  std::uint32_t shield = 0;                // shielded() sections entered (the runner's)
  bool yielded = false;                    // yield(): queue behind this turn's timers (the runner's)

  loop* last = nullptr;                    // the loop that ran it last (the runner's; wakers read it)
  cancel_hook* hook = nullptr;             // the runner's
  std::coroutine_handle<> resume_point;    // the runner's (or before start)
  promise_base* top = nullptr;             // innermost weft coroutine (the runner's, or before start)
  loop* live_owner = nullptr;              // whose live list holds it (for shutdown), from its first park
  task_context* live_prev = nullptr;       // that list's links, under its lock
  task_context* live_next = nullptr;
  // The strand ended: its root coroutine finished (stopped == false; the
  // owner takes its result), or it stopped — cancelled while parked, or
  // before it ever ran (stopped == true; no result). The owner destroys the
  // root frame here, which is in `resume_point`.
  void (*finished)(task_context*, bool stopped) noexcept = nullptr;
  // Then: the owner may now free or reuse the context. Called exactly once.
  void (*quiesced)(task_context*) noexcept = nullptr;
};

}  // namespace weft::detail
