// lib/sync/actor_lock.cpp — the lock actor of weft/detail/lock_actor.hpp: its mailbox and
// the processing of ask, release and withdraw.
//
// Invariants, all kept by whoever is draining:
//  * Messages are processed in the order their posts reached `mail_` (the
//    order of the CASes on it), which is what makes the grants FIFO: an ask
//    joins the queue when processed, and a grant always goes to the head.
//  * !held_ implies an empty queue: a release grants the head at once, and a
//    grant lost to a withdrawal passes on at once to the next waiter.
//  * After waking a waiter the drainer never touches it again (it may resume
//    at once on another loop and free its frame), and every message's `next`
//    is read before the message is processed (processing may hand the
//    message's owner the lock, and the owner may post it again).
#include <cassert>
#include <stdexcept>
#include <string>

#include <weft/actor_lock.hpp>

namespace weft::detail {

static_assert(alignof(lock_msg) >= 8, "the mailbox word keeps its tag in a message pointer's low 3 bits");

lock_actor::~lock_actor() {
  assert((mail_.load(std::memory_order_relaxed) & tag_mask) == idle_free &&
         "a lock was destroyed while held, waited for, or with a message in flight; keep it alive until "
         "every guard is released and every waiter is done");
}

void lock_actor::ask(lock_waiter* w) noexcept {
  w->ask_msg.waiter = w;
  w->withdraw_msg.waiter = w;
  post(&w->ask_msg, w);
}

void lock_actor::withdraw(lock_waiter* w) noexcept { post(&w->withdraw_msg, nullptr); }

void lock_actor::release_slow() noexcept { post(&release_msg_, nullptr); }

void lock_actor::post(lock_msg* m, lock_waiter* self) noexcept {
  std::uintptr_t cur = mail_.load(std::memory_order_relaxed);
  for (;;) {
    if (is_idle(cur)) {
      // acquire: the previous drainer (or fast path) left with a release; we
      // must see the state it left before we touch it.
      if (mail_.compare_exchange_weak(cur, busy, std::memory_order_acquire, std::memory_order_relaxed)) {
        fence_ = cur >> tag_bits;
        held_ = (cur & tag_mask) != idle_free;
        // relaxed: a snapshot for locked(); a fast path may have changed it.
        held_seen_.store(held_, std::memory_order_relaxed);
        drain(m, self);
        return;
      }
    } else {
      m->next = cur == busy ? nullptr : reinterpret_cast<lock_msg*>(cur);
      // release: the drainer that takes this batch must see m (and the
      // waiter fields it points to) as we wrote them. A Treiber push is safe
      // from ABA: it only ever links to the word it replaces.
      if (mail_.compare_exchange_weak(cur, reinterpret_cast<std::uintptr_t>(m), std::memory_order_release,
                                      std::memory_order_relaxed))
        return;  // the running drainer will process it
    }
  }
}

std::uintptr_t lock_actor::idle_word() const noexcept {
  const std::uintptr_t tag = !held_ ? idle_free : head_ == nullptr ? idle_held : idle_queued;
  return (static_cast<std::uintptr_t>(fence_) << tag_bits) | tag;
}

void lock_actor::drain(lock_msg* first, lock_waiter* self) noexcept {
  process(first, self);
  for (;;) {
    std::uintptr_t expected = busy;
    // release: the next drainer or fast path (acquire) must see the state we
    // leave. On failure there is mail, which the exchange below acquires.
    if (mail_.compare_exchange_strong(expected, idle_word(), std::memory_order_release, std::memory_order_relaxed))
      return;
    // acquire: pairs with the posters' release, so their messages are visible.
    auto* batch = reinterpret_cast<lock_msg*>(mail_.exchange(busy, std::memory_order_acquire));
    // The stack holds the newest message first: reverse the batch so that it
    // is processed in the order it was posted.
    lock_msg* in_order = nullptr;
    while (batch != nullptr) {
      lock_msg* next = batch->next;
      batch->next = in_order;
      in_order = batch;
      batch = next;
    }
    while (in_order != nullptr) {
      lock_msg* next = in_order->next;
      process(in_order, self);
      in_order = next;
    }
  }
}

void lock_actor::process(lock_msg* m, lock_waiter* self) noexcept {
  switch (m->kind) {
    case lock_msg::ask: {
      lock_waiter* w = m->waiter;
      if (held_) {
        push_back(w);  // no barging: behind everyone who asked before
      } else {
        assert(head_ == nullptr);
        grant(w, self);  // lost (w already withdrew): the lock simply stays free
      }
      break;
    }
    case lock_msg::release: {
      assert(held_ && "a lock was released that nobody holds");
      held_ = false;
      while (lock_waiter* w = pop_front())
        if (grant(w, self)) break;  // a lost grant passes on to the next waiter
      break;
    }
    case lock_msg::withdraw: {
      lock_waiter* w = m->waiter;
      if (w->queued) unlink(w);
      // Otherwise it was never queued (its ask found the lock free but the
      // claim taken) or a grant already popped it and lost. Either way it
      // is out of the queue: now it may resume. Last touch of w.
      wake(w->ctx);
      break;
    }
  }
  // relaxed: snapshots for locked() and waiters(); they order nothing.
  held_seen_.store(held_, std::memory_order_relaxed);
  queued_seen_.store(queued_, std::memory_order_relaxed);
}

bool lock_actor::grant(lock_waiter* w, lock_waiter* self) noexcept {
  if (w == self) {
    // The drain runs inside w's own await_suspend, before w has suspended:
    // its cancel hook and timer run on this thread, later, so nobody else
    // can take its claim now, and it needs no wake, just not to suspend.
    held_ = true;
    w->fence = ++fence_;
    w->claim.store(lock_waiter::granted, std::memory_order_relaxed);
    w->granted_inline = true;
    return true;
  }
  std::uint8_t expected = lock_waiter::pending;
  // acq_rel: one winner between the grant and the waiter's cancel hook or
  // timer (on other loops); the waiter reads the outcome after the wake.
  if (!w->claim.compare_exchange_strong(expected, lock_waiter::granted, std::memory_order_acq_rel,
                                        std::memory_order_relaxed))
    return false;  // it withdrew first; its withdraw message is on its way
  held_ = true;
  w->fence = ++fence_;
  wake(w->ctx);  // last touch of w
  return true;
}

void lock_actor::push_back(lock_waiter* w) noexcept {
  w->queued = true;
  w->q_next = nullptr;
  w->q_prev = tail_;
  if (tail_ != nullptr) tail_->q_next = w;
  else head_ = w;
  tail_ = w;
  ++queued_;
}

lock_waiter* lock_actor::pop_front() noexcept {
  lock_waiter* w = head_;
  if (w != nullptr) unlink(w);
  return w;
}

void lock_actor::unlink(lock_waiter* w) noexcept {
  assert(w->queued);
  if (w->q_prev != nullptr) w->q_prev->q_next = w->q_next;
  else head_ = w->q_next;
  if (w->q_next != nullptr) w->q_next->q_prev = w->q_prev;
  else tail_ = w->q_prev;
  w->q_prev = w->q_next = nullptr;
  w->queued = false;
  --queued_;
}

std::string describe_duration(clock::duration d) {
  if (d == clock::duration::max()) return "forever";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms != 0 || d <= clock::duration::zero()) return std::to_string(ms) + " ms";
  return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count()) + " us";
}

void check_lock_options(const lock_options& opts, const char* who) {
  if (opts.lease_timeout <= clock::duration::zero())
    throw std::invalid_argument(std::string("weft: ") + who +
                                ": lock_options::lease_timeout must be positive; use clock::duration::max() "
                                "for no lease limit");
}

void throw_sync_lease_expired(clock::duration lease) {
  throw lease_expired("weft: the lock holder overran its lease of " + describe_duration(lease) +
                      "; a plain-function block cannot be cancelled, so it ran to the end and its result "
                      "was dropped. Raise lock_options::lease_timeout, or do less while holding the lock");
}

}  // namespace weft::detail
