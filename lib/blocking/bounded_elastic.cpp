// lib/blocking/bounded_elastic.cpp — the bounded elastic pool: admission, workers, lifecycle.
//
// One mutex per pool guards the queues and figures (lib/blocking/elastic_core.hpp says
// who may touch what, and what a section under it costs). Each admission and
// each finished job takes it once, for a few pointer moves and counters; the
// expensive parts — running the job, delivering its outcome, waking a
// sleeping worker, building a rejection's message — happen outside it.
// Starting a thread is the exception: it happens under the lock. A worker that runs
// out of work sleeps on its own futex (elastic_parker) at once. Waking one
// costs a FUTEX_WAKE, and a burst of jobs handed to sleeping workers is woken
// by a chain of the workers themselves, not by the submitter (pass_baton_locked).
#include "blocking/elastic_core.hpp"
#include "core/unobserved.hpp"

#include <weft/bounded_elastic.hpp>
#include <weft/detail/saturating.hpp>

#include <pthread.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <functional>
#include <string>
#include <system_error>
#include <utility>

namespace weft {
namespace detail {
namespace {

// Linux thread names hold 15 characters: keep the "-N" suffix whole and cut
// the pool's name to make room.
std::string thread_name(const std::string& base, std::uint64_t n) {
  char suffix[24];
  const int len = std::snprintf(suffix, sizeof suffix, "-%llu", static_cast<unsigned long long>(n));
  constexpr std::size_t linux_limit = 15;
  const std::size_t room = static_cast<std::size_t>(len) < linux_limit ? linux_limit - len : 0;
  return base.substr(0, room).append(suffix, len);
}

void validate(const elastic_options& o) {
  if (o.max_threads == 0) throw std::invalid_argument("weft: elastic_options::max_threads must be at least 1");
  if (o.max_queued_per_thread == 0)
    throw std::invalid_argument("weft: elastic_options::max_queued_per_thread must be at least 1");
  if (o.ttl <= std::chrono::milliseconds::zero())
    throw std::invalid_argument("weft: elastic_options::ttl must be positive");
  if (o.core_threads > o.max_threads)
    throw std::invalid_argument("weft: elastic_options::core_threads (" + std::to_string(o.core_threads) +
                                ") must not exceed max_threads (" + std::to_string(o.max_threads) + ")");
}

constexpr const char* discarded_msg =
    "weft: the job was discarded by the bounded elastic scheduler's rejection policy "
    "(every worker busy and every queue full)";
constexpr const char* evicted_msg =
    "weft: the job was discarded unrun to make room for a newer one (rejection policy discard_oldest)";
constexpr const char* shut_down_msg = "weft: the bounded elastic scheduler is shut down and takes no new jobs";

void report(const elastic_core& c, std::exception_ptr e) noexcept {
  report_unobserved(c.opt.on_error, e, "a job run by bounded elastic scheduler", c.opt.name.c_str());
}

// Requires mu. Reached once: the last worker is gone and no new one may start.
// The states follow ThreadPoolExecutor's tryTerminate: tidying, in which Java
// runs its terminated() hook, then terminated. weft has no such hook (only
// the test seam), so tidying lasts as long as that seam takes, as a Java
// pool's does with the default empty terminated(): a state() poller may see
// it or not, but never out of order (both stores are seq_cst, under mu).
void terminate_locked(elastic_core& c) {
  assert(c.live == 0 && c.backlog.size() == 0 && c.state.load() != pool_state::running);
  c.state.store(pool_state::tidying);
  if (c.hooks.on_tidying) c.hooks.on_tidying();
  c.state.store(pool_state::terminated);
  c.terminated_cv.notify_all();
}

// Requires mu. The next job for `w`: its own oldest, else the oldest of the
// busiest worker (so nothing waits behind a long job while `w` could run it).
job_node* take_locked(elastic_core& c, elastic_worker& w) {
  elastic_queue* from = w.queue.empty() ? c.backlog.longest() : &w.queue;
  return from ? c.backlog.pop(*from) : nullptr;  // null: every queue is empty
}

// Requires mu. Lists `w` as idle (on top of the stack); it has just found
// every queue empty. Returns whether it is a surplus worker (above
// core_threads), which ages out after ttl; start_idle_clock takes it from
// there once mu is released.
bool go_idle_locked(elastic_core& c, elastic_worker& w) {
  assert(!w.idle && w.queue.empty());
  w.idle = true;
  c.idle.push(&w);
  return c.live > c.opt.core_threads;
}

// Called by `w` itself, without mu, after go_idle_locked: starts its ttl at
// `since` and returns when it may stop waiting. idle_since is the worker's
// own: only its thread writes or reads it, so it needs no lock.
elastic_parker::clock::time_point start_idle_clock(const elastic_core& c, elastic_worker& w, bool surplus,
                                                   elastic_parker::clock::time_point since) {
  w.idle_since = since;
  return surplus ? saturating_add(since, c.opt.ttl) : elastic_parker::clock::time_point::max();
}

// Requires mu. Takes `w` off the idle stack, wherever it is on it.
void leave_idle_locked(elastic_core& c, elastic_worker& w) {
  if (!w.idle) return;
  w.idle = false;
  c.idle.erase(&w);
}

// Requires mu. Lists the slot of `w`, which has no thread, as free.
void free_slot_locked(elastic_core& c, elastic_worker& w) noexcept {
  c.free_slots.push_back(w.queue.slot);  // within capacity: reserved when the slot was made
  std::push_heap(c.free_slots.begin(), c.free_slots.end(), std::greater<>());
}

// Requires mu. The idle workers, for a shutdown to unpark once mu is released.
std::vector<elastic_worker*> idle_workers_locked(const elastic_core& c) {
  std::vector<elastic_worker*> all;
  all.reserve(c.idle.size());
  c.idle.for_each([&](elastic_worker* w) { all.push_back(w); });
  return all;
}

// Requires mu. When an idle `w` may stop waiting and exit: surplus workers
// (above core_threads) after ttl; a core worker only at shutdown.
elastic_parker::clock::time_point idle_deadline_locked(const elastic_core& c, const elastic_worker& w) {
  return c.live > c.opt.core_threads ? saturating_add(w.idle_since, c.opt.ttl)
                                     : elastic_parker::clock::time_point::max();
}

// Requires mu. Queues `w`, just handed a job while asleep, for the wake
// chain (below) to unpark.
void pend_locked(elastic_core& c, elastic_worker& w) {
  assert(!w.pending && !w.idle);
  w.pending = true;
  w.wake_next = nullptr;
  w.wake_prev = c.wake_pending_tail;
  (c.wake_pending_tail ? c.wake_pending_tail->wake_next : c.wake_pending_head) = &w;
  c.wake_pending_tail = &w;
}

// Requires mu. Takes `w` out of the wake chain's queue, wherever it is.
void unpend_locked(elastic_core& c, elastic_worker& w) {
  if (!w.pending) return;
  w.pending = false;
  (w.wake_prev ? w.wake_prev->wake_next : c.wake_pending_head) = w.wake_next;
  (w.wake_next ? w.wake_next->wake_prev : c.wake_pending_tail) = w.wake_prev;
  w.wake_prev = w.wake_next = nullptr;
}

// Requires mu. The wake chain: a submitter that hands jobs to several idle
// workers in a burst wakes only the first, giving it the baton; the others
// wait in wake_pending, and each woken worker, first thing after waking,
// passes the baton to the next and unparks it. FUTEX_WAKE is what a hand-off
// costs (a few microseconds, most of it the waker's), so this moves that cost
// from the submitting thread (a loop, which is the bottleneck of a burst) to
// the workers, in parallel; and a job still queued at a worker not yet woken
// is taken meanwhile by any worker that finishes (take_locked steals from
// the busiest), which batches bursts. W4b went from ~400k to over 1M
// offloads/s with it. The price: the k-th worker of a burst wakes after k
// hops of a few microseconds each. While a worker waits in wake_pending it
// is not idle, so the invariant that no job waits while a worker is idle
// still holds, and since batons > 0 whenever wake_pending is not empty,
// every waiting worker is woken. Returns the worker to unpark once mu is
// released; null if none.
elastic_worker* pass_baton_locked(elastic_core& c, elastic_worker& w) {
  if (!w.baton) return nullptr;
  w.baton = false;
  --c.batons;
  elastic_worker* next = c.wake_pending_head;
  if (!next) return nullptr;
  unpend_locked(c, *next);
  next->baton = true;
  ++c.batons;
  assert(!c.wake_pending_head || c.batons > 0);
  return next;
}

// Requires mu; `w` woke up still listed idle. Whether it should leave.
bool should_leave_locked(const elastic_core& c, const elastic_worker& w) {
  if (c.state.load() != pool_state::running) return true;
  return elastic_parker::clock::now() >= idle_deadline_locked(c, w);
}

// Requires mu, held by lk; `w` just came back from its parker. Passes the
// wake chain on (unparking the next worker with mu released), then says
// whether `w` leaves the pool, having left it if so: still listed idle means
// nobody handed it a job (spurious wake, ttl, shutdown).
bool woke_to_leave_locked(elastic_core& c, elastic_worker& w, std::unique_lock<brief_spin_mutex>& lk) {
  // Still queued for the chain means it woke on its own: its idle ttl ran
  // out before the chain reached it. It is awake and will look at its queue,
  // so it leaves the chain's queue now. Left there, it could go idle, be
  // handed another job and be queued a second time (a cycle that lost the
  // workers after it: parked with a job, never woken, and a shutdown that
  // never ended), or be handed the baton while running a long job, stalling
  // every wake behind it.
  unpend_locked(c, w);
  if (elastic_worker* next = pass_baton_locked(c, w)) {
    lk.unlock();
    next->parker.unpark();
    lk.lock();
  }
  if (w.idle && should_leave_locked(c, w)) {
    leave_idle_locked(c, w);
    return true;
  }
  return false;
}

void worker_main(elastic_core* pc, elastic_worker* pw) noexcept {
  elastic_core& c = *pc;
  elastic_worker& w = *pw;
  const std::stop_token stop = c.stop.get_token();
  // w.seq was written before this thread was created and stays put until it exits.
  pthread_setname_np(pthread_self(), thread_name(c.opt.name, w.seq).c_str());
  std::unique_lock lk(c.mu);
  for (;;) {
    // Holding mu. A worker still listed idle was handed nothing; one that is
    // not has just started, was handed a job (which may since have been
    // withdrawn or taken by another worker), or is draining at shutdown.
    job_node* n = w.idle ? nullptr : take_locked(c, w);
    if (!n) {
      const bool fresh = !w.idle;  // else still idle from before: its ttl runs on
      bool surplus = false;
      if (fresh) {
        if (c.state.load() != pool_state::running) break;  // shut down and nothing left to take
        surplus = go_idle_locked(c, w);
      }
      const auto kept = fresh ? elastic_parker::clock::time_point{} : idle_deadline_locked(c, w);
      lk.unlock();
      w.parker.park_until(fresh ? start_idle_clock(c, w, surplus, elastic_parker::clock::now()) : kept);
      lk.lock();
      if (woke_to_leave_locked(c, w, lk)) break;
      continue;
    }

    // Run jobs back to back, taking the pool's lock once per job: the section
    // that counts a finished job also takes the next one, or lists this
    // worker idle when there is none.
    ++c.active;
    lk.unlock();
    bool went_idle = false, surplus = false;
    elastic_parker::clock::time_point finished;
    while (n) {
      n->ops->run(n, stop);
      // When this worker goes idle, if it finds nothing next. Read before
      // taking mu rather than under it, as it once was: that section (one
      // per job) is where W4b queues. W4b, 21 runs each: 3.97M offloads/s
      // read under mu, 4.24M read here, and 3.88M read after letting go of
      // mu and only when going idle. Fewer clock reads but slower: probably
      // the finishing worker then reaches mu sooner and contends more with
      // the loops' admissions.
      finished = elastic_parker::clock::now();
      lk.lock();
      --c.active;
      ++c.completed;
      job_node* next = take_locked(c, w);
      if (next) {
        ++c.active;
      } else if (c.state.load() == pool_state::running) {
        // Idle before the outcome is delivered, so a caller that has seen the
        // result also sees this worker available and the figures updated.
        surplus = go_idle_locked(c, w);
        went_idle = true;
      }
      lk.unlock();
      if (std::exception_ptr e = n->ops->finish(n)) report(c, e);
      n = next;
    }
    // park_until polls for 20 us before it sleeps (elastic_parker.hpp). A
    // 50 us spin here measured badly under CPU contention (the spinner delays
    // the loop it just woke on the same CPU: W4 p99 54 us, ~250k/s); on a
    // quiet VM, where waking a halted vCPU costs tens of microseconds, the
    // short poll took W4 from p50 89 us to 1.1 us. A job handed to us
    // meanwhile has already unparked us: park returns at once.
    if (went_idle) w.parker.park_until(start_idle_clock(c, w, surplus, finished));
    lk.lock();
    if (woke_to_leave_locked(c, w, lk)) break;
  }
  // Leaving, with mu held: the last touch of the core by this thread.
  c.backlog.close(w.queue);
  w.live = false;
  free_slot_locked(c, w);
  --c.live;
  if (c.live == 0 && c.state.load() != pool_state::running) terminate_locked(c);
}

// Requires mu. Starts a worker thread (its queue empty), or returns
// null (and says why) if the thread cannot be created.
elastic_worker* start_worker_locked(elastic_core& c, std::string& error) {
  if (c.hooks.fail_thread_start && c.hooks.fail_thread_start()) {
    error = std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again)).what();
    return nullptr;
  }
  elastic_worker* w = nullptr;
  if (!c.free_slots.empty()) {
    std::pop_heap(c.free_slots.begin(), c.free_slots.end(), std::greater<>());
    w = c.slots[c.free_slots.back()].get();
    c.free_slots.pop_back();
  } else {
    c.slots.push_back(std::make_unique<elastic_worker>());
    w = c.slots.back().get();
    w->pool = &c;
    c.backlog.add_slot(w->queue);
    c.free_slots.reserve(c.slots.size());  // so that freeing a slot never allocates,
    c.idle.reserve(c.slots.size());        // nor going idle
  }
  // A previous thread of this slot has left (live == false was its last
  // act under mu); joining it waits only for its return.
  if (w->thread.joinable()) w->thread.join();
  w->seq = c.thread_seq + 1;
  try {
    w->thread = std::thread(worker_main, &c, w);
  } catch (const std::system_error& e) {
    error = e.what();
    free_slot_locked(c, *w);
    return nullptr;
  }
  ++c.thread_seq;
  w->live = true;
  c.backlog.open(w->queue);  // the new thread waits for mu, so it finds the slot complete
  ++c.live;
  c.largest = std::max(c.largest, c.live);
  return w;
}

// Requires mu. The queue of the busy worker with the fewest queued jobs, if
// it has room; null otherwise (every queue is full, or no worker is live).
elastic_queue* least_busy_locked(elastic_core& c) {
  elastic_queue* q = c.backlog.shortest();
  return q && q->size() < c.opt.max_queued_per_thread ? q : nullptr;
}

}  // namespace

elastic_core::elastic_core(elastic_options o) : opt((validate(o), std::move(o))) {
  slots.reserve(opt.max_threads < 1024 ? opt.max_threads : 1024);
  backlog.keep_age_order(opt.on_reject == rejection_policy::discard_oldest);
}

void elastic_set_test_hooks(bounded_elastic& pool, elastic_test_hooks hooks) {
  elastic_core& c = elastic_access::core(pool);
  std::lock_guard lk(c.mu);
  c.hooks = std::move(hooks);
}

admitted elastic_admit(elastic_core* pc, job_node* n, const char** why) {
  elastic_core& c = *pc;
  std::unique_lock lk(c.mu);
  // `submitted` counts a job once the pool has accepted it (queued or handed
  // to a worker); a refusal counts in `rejected` only (elastic_stats).
  // The messages of the exceptions below are built after letting go of mu
  // (opt is const, so reading it needs no lock).
  if (c.state.load() != pool_state::running) {
    ++c.rejected;
    if (c.opt.on_reject == rejection_policy::abort) {
      lk.unlock();
      throw rejected_execution("weft: bounded elastic scheduler '" + c.opt.name +
                               "' is shut down and takes no new jobs");
    }
    *why = shut_down_msg;  // caller_runs and discard_oldest discard after shutdown, as in Java
    return admitted::discarded;
  }

  elastic_worker* w = nullptr;
  elastic_queue* q = nullptr;
  bool unpark = false;
  std::string start_error;
  if (elastic_worker* top = c.idle.top()) {
    w = top;
    leave_idle_locked(c, *w);
    // The wake chain (see pass_baton_locked): if a woken worker is still to
    // pass the baton on, it will wake this one too, so the submitter (often a
    // loop thread) makes no system call. Otherwise this wake starts a chain.
    if (c.batons > 0) {
      pend_locked(c, *w);
    } else {
      w->baton = true;
      ++c.batons;
      unpark = true;
    }
  } else if (c.live < c.opt.max_threads) {
    w = start_worker_locked(c, start_error);  // null: fall back to an existing worker
  }
  q = w ? &w->queue : least_busy_locked(c);

  if (!q) {
    if (c.live == 0) {
      // Only reachable when starting the first thread failed: there is no
      // worker to give the job to and none may ever come, so say why.
      ++c.rejected;
      lk.unlock();
      throw rejected_execution("weft: bounded elastic scheduler '" + c.opt.name +
                               "' could not start a worker thread (" + start_error +
                               ") and has no running worker to take the job");
    }
    ++c.rejected;
    switch (c.opt.on_reject) {
      case rejection_policy::abort:
        lk.unlock();
        throw rejected_execution("Task capacity of bounded elastic scheduler reached while scheduling 1 tasks (" +
                                 std::to_string(c.opt.max_queued_per_thread + 1) + "/" +
                                 std::to_string(c.opt.max_queued_per_thread) + ")");
      case rejection_policy::caller_runs:
        return admitted::run_here;
      case rejection_policy::discard:
        *why = discarded_msg;
        return admitted::discarded;
      case rejection_policy::discard_oldest: {
        // Every queue is full. Java's DiscardOldestPolicy drops the head of
        // its one queue, the job that has waited longest; with a queue per
        // worker that is the oldest queued job of the whole pool, wherever
        // it waits (the backlog keeps the order of admission for this
        // policy). The new job takes its room: the back of that worker's
        // queue. The count of rejected stays one per job given up: the
        // evicted one, not `n`.
        job_node* evicted = c.backlog.oldest();
        elastic_queue& room = *static_cast<elastic_queue*>(evicted->queue);
        c.backlog.unlink(evicted);
        c.backlog.push(room, n);
        ++c.submitted;  // the new job is accepted; the evicted one was counted when it was
        lk.unlock();
        evicted->ops->drop(evicted, evicted_msg);
        return admitted::queued;
      }
    }
  }

  c.backlog.push(*q, n);
  ++c.submitted;
  lk.unlock();
  // Worker objects outlive their threads (see elastic_core.hpp), so this is
  // safe even if the worker has already run the job and aged out.
  if (unpark) w->parker.unpark();
  return admitted::queued;
}

bool elastic_withdraw(elastic_core* c, job_node* n) noexcept {
  std::lock_guard lk(c->mu);
  if (!n->queue) return false;
  c->backlog.unlink(n);
  ++c->withdrawn;  // never ran: not completed
  return true;
}

std::stop_token elastic_stop_token(elastic_core* c) noexcept { return c->stop.get_token(); }

std::string elastic_audit(const elastic_core& c) {
  std::lock_guard lk(c.mu);
  std::size_t live = 0, idle = 0, queued = 0;
  for (std::size_t i = 0; i < c.slots.size(); ++i) {
    const elastic_worker& w = *c.slots[i];
    if (w.live) ++live;
    if (w.idle) ++idle;
    queued += w.queue.size();
    if (w.queue.slot != i) return "a queue knows its slot";
    if (w.live != w.queue.open) return "a queue is open exactly while its worker is live (B1)";
    if (!w.live && (w.idle || !w.queue.empty())) return "a slot with no thread is neither idle nor holds jobs";
    if (w.idle && !w.queue.empty()) return "an idle worker's queue is empty";
  }
  if (live != c.live) return "live counts the slots with a thread";
  if (c.largest < c.live || c.live > c.opt.max_threads) return "live <= largest and live <= max_threads";
  if (queued != c.backlog.size()) return "the backlog's size is the sum of the queues' lengths (B3)";

  if (!c.idle.consistent()) return "the idle stack's positions agree (S1-S3)";
  std::size_t stacked = 0;
  bool all_idle = true;
  c.idle.for_each([&](const elastic_worker* w) {
    ++stacked;
    all_idle = all_idle && w->idle;
  });
  if (!all_idle || stacked != idle) return "the idle stack holds exactly the workers marked idle";

  if (c.free_slots.size() != c.slots.size() - live) return "every slot without a thread is free";
  if (!std::is_heap(c.free_slots.begin(), c.free_slots.end(), std::greater<>())) return "free_slots is a min-heap";
  for (std::uint32_t f : c.free_slots) {
    if (f >= c.slots.size() || c.slots[f]->live) return "a free slot has no thread";
  }
  if (!c.backlog.index_consistent()) return "the backlog's index agrees with its queues (B2, T1)";
  if (!c.backlog.age_order_consistent()) return "the backlog's age order holds every queued job once (B4)";

  std::size_t pending = 0;
  for (const elastic_worker* w = c.wake_pending_head; w; w = w->wake_next) {
    if (!w->pending || !w->live || w->idle) return "a worker waiting for the wake chain is marked so, live, not idle";
    if ((w->wake_prev ? w->wake_prev->wake_next : c.wake_pending_head) != w) return "the chain queue's links agree";
    if (!w->wake_next && c.wake_pending_tail != w) return "wake_pending_tail is the chain queue's last";
    if (++pending > c.slots.size()) return "the wake chain's queue has no cycle";
  }
  for (const auto& s : c.slots) pending -= s->pending ? 1 : 0;
  if (pending != 0) return "every worker marked pending is in the chain's queue";
  if (c.wake_pending_head && c.batons == 0) return "a pending wake has a baton to bring it";
  return {};
}

void elastic_retain(elastic_core* c) noexcept {
  // relaxed: a new reference is taken only by a party that reaches the core
  // through one it already holds (the pool object).
  c->refs.fetch_add(1, std::memory_order_relaxed);
}

void elastic_release(elastic_core* c) noexcept {
  // acq_rel: whoever frees the core must see every write the other holders made.
  if (c->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete c;
}

}  // namespace detail

bounded_elastic::bounded_elastic(elastic_options o) : core_(new detail::elastic_core(std::move(o))) {}

bounded_elastic::~bounded_elastic() {
  shutdown();
  {
    std::unique_lock lk(core_->mu);
    core_->terminated_cv.wait(lk, [&] { return core_->state.load() == pool_state::terminated; });
  }
  // Terminated: no thread will start again, and each live one has made its
  // last touch of the core. Join them before the core can be freed.
  for (auto& s : core_->slots) {
    if (s->thread.joinable()) s->thread.join();
  }
  detail::elastic_release(core_);
}

void bounded_elastic::admit_owned(detail::job_node* n) {
  const char* why = nullptr;
  detail::admitted a;
  try {
    a = detail::elastic_admit(core_, n, &why);
  } catch (...) {
    n->ops->drop(n, "");  // the caller hears of it through the exception itself
    throw;
  }
  switch (a) {
    case detail::admitted::queued:
      return;
    case detail::admitted::run_here: {
      job here{n};
      here(detail::elastic_stop_token(core_));  // what an execute()d job throws propagates to the caller
      return;
    }
    case detail::admitted::discarded:
      n->ops->drop(n, why);
      return;
  }
}

void bounded_elastic::shutdown() {
  std::vector<detail::elastic_worker*> sleepers;
  {
    std::lock_guard lk(core_->mu);
    if (core_->state.load() != pool_state::running) return;
    core_->state.store(pool_state::shutdown);
    sleepers = detail::idle_workers_locked(*core_);
    if (core_->live == 0) detail::terminate_locked(*core_);
  }
  for (auto* w : sleepers) w->parker.unpark();
}

std::vector<job> bounded_elastic::shutdown_now() {
  std::vector<job> unrun;
  std::vector<detail::elastic_worker*> sleepers;
  {
    std::lock_guard lk(core_->mu);
    const pool_state s = core_->state.load();
    if (s == pool_state::running || s == pool_state::shutdown) core_->state.store(pool_state::stop);
    unrun.reserve(core_->backlog.size());
    for (auto& w : core_->slots) {
      while (detail::job_node* n = core_->backlog.pop(w->queue)) unrun.emplace_back(n);
    }
    core_->returned += unrun.size();  // accepted, handed back unrun: not rejected
    sleepers = detail::idle_workers_locked(*core_);
    if (core_->live == 0 && core_->state.load() == pool_state::stop) detail::terminate_locked(*core_);
  }
  // Outside the lock: stop callbacks are user code.
  core_->stop.request_stop();
  for (auto* w : sleepers) w->parker.unpark();
  return unrun;
}

bool bounded_elastic::await_termination(std::chrono::nanoseconds d) {
  using clock = std::chrono::steady_clock;
  const auto until = detail::saturating_add(clock::now(), d);
  auto terminated = [&] { return core_->state.load() == pool_state::terminated; };
  std::unique_lock lk(core_->mu);
  if (until == clock::time_point::max()) {
    core_->terminated_cv.wait(lk, terminated);
    return true;
  }
  return core_->terminated_cv.wait_until(lk, until, terminated);
}

bool bounded_elastic::is_shutdown() const noexcept { return state() != pool_state::running; }

bool bounded_elastic::is_terminated() const noexcept { return state() == pool_state::terminated; }

pool_state bounded_elastic::state() const noexcept { return core_->state.load(); }

elastic_stats bounded_elastic::stats() const {
  std::lock_guard lk(core_->mu);
  const detail::elastic_core& c = *core_;
  elastic_stats s;
  s.pool_size = c.live;
  s.active = c.active;
  s.idle = c.idle.size();
  s.largest_pool_size = c.largest;
  s.queued = c.backlog.size();
  s.submitted = c.submitted;
  s.completed = c.completed;
  s.rejected = c.rejected;
  s.withdrawn = c.withdrawn;
  s.returned = c.returned;
  return s;
}

}  // namespace weft
