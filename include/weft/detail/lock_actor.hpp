// weft/detail/lock_actor.hpp — the mailbox actor that every weft lock
// (actor_lock, each key of a keyed_lock) is made of, and the waiter and
// message records it threads through its queue and mailbox. lock_guard.hpp
// holds the guard a grant becomes; acquire_awaiter.hpp the party that asks.
//
// The guarantee: a lock grants strictly FIFO, in the order the asks reached
// its mailbox, and hands the lock directly from the releasing holder to the
// head waiter (a newcomer never barges past a waiter).
//
// The model is an actor. A lock's state (held or not, the waiter queue, the
// fence counter) changes only by processing its mailbox, one message at a
// time: ask (a waiter wants the lock), release (the holder lets go) and
// withdraw (a waiter that was cancelled or timed out leaves). There is no
// mutex and no thread of its own: whoever posts a message and finds the actor
// idle becomes its drainer, processes its own message and then everything
// posted meanwhile, and leaves the actor idle again. The mailbox is one word,
// and while the actor is idle that word also holds its state:
//
//   fence<<3 | 1   idle, free (then the queue is empty)
//   fence<<3 | 3   idle, held, nobody queued
//   fence<<3 | 5   idle, held, waiters queued
//   7              busy: a drainer is running (it owns the state); no mail
//   lock_msg*      busy, with these messages waiting for it, newest first
//                  (a Treiber stack; the drainer reverses each batch). A
//                  message is 8-aligned, so its low 3 bits are 0.
//
// An ask on an idle free lock and a release of an idle lock nobody waits for
// are each processed in a single CAS on that word, with no drain: that is
// the uncontended path, one CAS to acquire and one to release. Everything
// else is posted and drained.
//
// Who ends a wait: a waiter's `claim` word is taken exactly once, by the grant
// (from the drainer, on any thread), by its cancel hook (on the loop that
// runs the cancelled waiter) or by its acquire timer (on whichever loop
// fires it). The winner alone leads to the wake:
// a grant wakes the waiter itself; a withdrawal posts a withdraw message and
// the actor wakes the waiter after it has left the queue (its frame holds the
// queue links, so it may not resume before). A grant that finds the claim
// already taken is lost and the actor passes the lock to the next waiter.
//
// Grants wake through detail::wake, so the next holder runs on its own loop
// and never on the releasing task's stack: a chain of any length of waiters
// each releasing to the next uses constant stack.
//
// Memory: a holder's writes happen before the next holder's reads, through
// the release/acquire pairs on the mailbox word (fast paths, drain exit and
// entry, posts) and the wake (which publishes through the loop's queues).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <weft/detail/context.hpp>
#include <weft/detail/timer.hpp>

namespace weft::detail {

struct lock_waiter;

// One message to a lock's actor. Intrusive: ask and withdraw live in the
// waiter, release in the actor (a lock has one holder, so at most one release
// is ever in flight).
struct lock_msg {
  enum kind_t : std::uint8_t { ask, release, withdraw };
  lock_msg* next = nullptr;  // mailbox link; the drainer's once taken
  lock_waiter* waiter = nullptr;
  kind_t kind = ask;
};

// A party waiting for a lock; lives in the acquiring coroutine's frame.
struct lock_waiter {
  // claim: pending — nobody has ended the wait yet;
  //        granted — the actor granted the lock (fence is set);
  //        cancelled / timed_out — the waiter withdrew; the actor wakes it
  //        once it is out of the queue, and never grants it.
  static constexpr std::uint8_t pending = 0, granted = 1, cancelled = 2, timed_out = 3;
  std::atomic<std::uint8_t> claim{pending};

  bool granted_inline = false;  // granted without suspending (fast path, or a drain inside its own ask)
  bool queued = false;          // in the actor's queue (actor only)
  lock_waiter* q_prev = nullptr;  // the actor's FIFO of waiters (actor only)
  lock_waiter* q_next = nullptr;
  task_context* ctx = nullptr;  // woken by the grant or after the withdrawal
  std::uint64_t fence = 0;      // written with the grant
  // Their `waiter` is set by ask(), not here: GCC 12 may construct an
  // awaiter that is a member of a co_await'ed aggregate temporary at one
  // address and then use a bitwise copy of it, so an address taken in a
  // constructor is not to be trusted.
  lock_msg ask_msg{nullptr, nullptr, lock_msg::ask};
  lock_msg withdraw_msg{nullptr, nullptr, lock_msg::withdraw};

  lock_waiter() noexcept = default;
  lock_waiter(const lock_waiter&) = delete;  // the actor holds pointers to it
  lock_waiter& operator=(const lock_waiter&) = delete;
};

class lock_actor {
 public:
  lock_actor() noexcept { lease_.actor = this; }
  lock_actor(const lock_actor&) = delete;
  lock_actor& operator=(const lock_actor&) = delete;
  ~lock_actor();  // debug builds assert the lock is free and nobody waits

  // The uncontended ask: takes an idle, free lock in one CAS. False when the
  // lock is held, queued for, or being drained: then ask() decides.
  bool try_acquire(std::uint64_t& fence) noexcept {
    std::uintptr_t w = mail_.load(std::memory_order_relaxed);
    if ((w & tag_mask) != idle_free) return false;
    const std::uintptr_t taken = w + (std::uintptr_t{1} << tag_bits) + (idle_held - idle_free);  // fence + 1
    // acquire: the previous holder's writes (published by its release CAS
    // or its drain's exit) happen before ours.
    if (!mail_.compare_exchange_strong(w, taken, std::memory_order_acquire, std::memory_order_relaxed))
      return false;
    fence = taken >> tag_bits;
    return true;
  }
  // From w's await_suspend, on the loop running w. Pre: w->ctx set, claim pending.
  // Post: granted_inline when w got the lock during this call (no suspend).
  void ask(lock_waiter* w) noexcept;
  // After w's claim was taken by its cancel hook or timer: the actor takes it
  // out of the queue and then wakes it.
  void withdraw(lock_waiter* w) noexcept;
  // The holder lets go; the head waiter, if any, is granted. Any thread.
  void release() noexcept {
    std::uintptr_t w = mail_.load(std::memory_order_relaxed);
    // release: our writes under the lock happen before the next holder's.
    if ((w & tag_mask) == idle_held &&
        mail_.compare_exchange_strong(w, (w & ~tag_mask) | idle_free, std::memory_order_release,
                                      std::memory_order_relaxed))
      return;
    release_slow();
  }

  bool locked() const noexcept {
    // relaxed: a snapshot for callers; it orders nothing.
    const std::uintptr_t w = mail_.load(std::memory_order_relaxed);
    if (is_idle(w)) return (w & tag_mask) != idle_free;
    return held_seen_.load(std::memory_order_relaxed);
  }
  std::size_t waiters() const noexcept {
    // relaxed: a snapshot for callers; it orders nothing.
    return queued_seen_.load(std::memory_order_relaxed);
  }

  // Fences continue after `floor` (keyed_lock: a key's actor is recreated
  // with the fence its previous incarnation reached). Both only while the
  // actor is idle and free, and ordered by the caller (the key table's mutex).
  void continue_fences_after(std::uint64_t floor) noexcept {
    mail_.store((static_cast<std::uintptr_t>(floor) << tag_bits) | idle_free, std::memory_order_relaxed);
  }
  std::uint64_t last_fence() const noexcept { return mail_.load(std::memory_order_relaxed) >> tag_bits; }

  // The task that took the current grant (set as its guard is made, cleared
  // before the release), so that the holder asking again is an error rather
  // than a deadlock. relaxed: only a task comparing with itself reads it
  // meaningfully, and its own writes are in its program order.
  void set_owner(task_context* c) noexcept { owner_.store(c, std::memory_order_relaxed); }
  bool held_by(const task_context* c) const noexcept {
    return c != nullptr && owner_.load(std::memory_order_relaxed) == c;
  }

  // The lease of the current grant (actor_lock::acquire with a lease): when
  // it runs out, the owning task is cancelled; it stops at its suspension
  // point and its guard, destroyed, lets the lock move on. Armed by the
  // owner as it takes the guard; ended by the guard (release or move, any
  // thread) before the owner is forgotten for good: a disarm racing the fire
  // waits for it under the wheel's lock, so the fire never reaches a task
  // that has let go.
  void arm_lease(clock::time_point until) noexcept { arm_timer(&lease_, until); }
  // The guard leaves its owner (released or moved): no re-entry check, no lease.
  void forget_owner() noexcept {
    set_owner(nullptr);
    disarm_timer(&lease_);
  }

  // Set by keyed_lock: a guard or waiter of this actor lets go of its
  // reference to it. Called after release(), or after a failed acquire.
  void (*unref)(lock_actor*) noexcept = nullptr;

 private:
  static constexpr unsigned tag_bits = 3;
  static constexpr std::uintptr_t tag_mask = 7;
  static constexpr std::uintptr_t idle_free = 1, idle_held = 3, idle_queued = 5, busy = 7;
  static constexpr bool is_idle(std::uintptr_t w) noexcept {
    return (w & 1) != 0 && w != busy;  // a message pointer has tag 0
  }

  void release_slow() noexcept;
  void post(lock_msg* m, lock_waiter* self) noexcept;
  void drain(lock_msg* first, lock_waiter* self) noexcept;
  std::uintptr_t idle_word() const noexcept;
  void process(lock_msg* m, lock_waiter* self) noexcept;
  bool grant(lock_waiter* w, lock_waiter* self) noexcept;
  void push_back(lock_waiter* w) noexcept;
  lock_waiter* pop_front() noexcept;
  void unlink(lock_waiter* w) noexcept;

  // The mailbox word (states in the header comment).
  std::atomic<std::uintptr_t> mail_{idle_free};
  // The actor's state while busy, the drainer's alone (loaded from and
  // stored back into the idle word). Invariant: !held_ => head_ == nullptr
  // (a release grants the head at once, a lost grant passes on at once).
  bool held_ = false;
  std::uint64_t fence_ = 0;
  // The queue lives here even while idle; only drainers touch it.
  lock_waiter* head_ = nullptr;
  lock_waiter* tail_ = nullptr;
  std::size_t queued_ = 0;
  lock_msg release_msg_{nullptr, nullptr, lock_msg::release};
  // held_ while busy, and queued_, for locked() and waiters() from any thread.
  std::atomic<bool> held_seen_{false};
  std::atomic<std::size_t> queued_seen_{0};
  std::atomic<task_context*> owner_{nullptr};
  struct lease_timer : timer_node {
    lease_timer() noexcept {
      fire = [](timer_node* t) noexcept {
        // relaxed: the owner wrote it before arming; a guard that let go
        // clears it and then waits for this callback (forget_owner).
        if (task_context* c = static_cast<lease_timer*>(t)->actor->owner_.load(std::memory_order_relaxed))
          request_cancel(c);
      };
    }
    lock_actor* actor;
  } lease_{};
};

// Makes a lock_guard for a grant (acquire_awaiter.hpp); the guard's
// constructor that adopts a grant is private to it.
struct lock_access;

}  // namespace weft::detail
