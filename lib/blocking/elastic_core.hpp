// lib/blocking/elastic_core.hpp — the state behind a bounded_elastic: workers, their
// queues, the figures, the lifecycle.
//
// Ground rules:
//  * Everything below `mu` is guarded by it (but a worker's idle_since). A
//    section under it is a few pointer moves and counters, plus the index
//    of the next rule but one, except:
//     - starting a worker thread (start_worker_locked): pthread_create, about
//       35 us on the 2-vCPU VM (a stack mapping and a clone), and when the
//       slot had a thread before, joining it, which has already let go of
//       mu and only has to return. Once per thread started, so at most
//       max_threads times per ttl. It stays under mu so that a failed start
//       falls back to an existing worker within the same decision
//       (tokio#8406) and no admission sees a slot half started.
//     - shutdown() and shutdown_now(): a vector of the idle workers, and of
//       the queued jobs, O(workers + jobs) with an allocation, once a pool.
//     - the test seams (elastic_test_hooks) and
//       elastic_audit.
//    No user code (a job, its destructor, a drop action, on_error) runs
//    under it, and a rejection's message is built after letting go of it.
//  * Worker objects are never freed before the core: a slot is reused by the
//    next thread started in it. So a submitter may unpark a worker after
//    letting go of `mu` even if that worker has since exited.
//  * Invariant (what "no head-of-line blocking" rests on): while any worker is
//    idle, no job waits behind a running one; the only queued jobs are those
//    just handed to workers being woken. Jobs are queued behind a running job
//    only when the idle stack is empty, and a worker goes idle only after
//    finding every queue empty (it takes the oldest job of the busiest
//    worker first).
//  * A worker handed a job is taken off the idle stack by the submitter and
//    then either unparked at once or queued in wake_pending for the wake
//    chain (pass_baton_locked in lib/blocking/bounded_elastic.cpp); a worker sleeps
//    only while listed idle or waiting there.
//  * What an admission or a finished job costs under `mu` does not grow with
//    the workers: the idle stack is O(1) (amortized when a worker leaves it
//    from the middle), the wake chain's queue an intrusive list, the free
//    slots a min-heap (O(log slots), only when a thread starts or leaves),
//    and the shortest and longest queues come from the backlog's index
//    (O(log slots); below its threshold, a scan of at most that many slots:
//    elastic_backlog.hpp). Only shutdown and shutdown_now (once per pool) and
//    the test-only elastic_audit walk every worker or job.
//  * The core is reference counted: the bounded_elastic holds one reference
//    and each suspended run() awaiter another, so a cancel hook may lock `mu`
//    even after the pool object is gone. Worker threads hold none: the pool's
//    destructor joins them before dropping its reference.
#pragma once

#include "blocking/brief_spin_mutex.hpp"
#include "blocking/elastic_backlog.hpp"
#include "blocking/elastic_parker.hpp"
#include "blocking/elastic_queue.hpp"
#include "blocking/idle_stack.hpp"

#include <weft/bounded_elastic.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace weft::detail {

struct elastic_core;

// Seams for tests, set through elastic_set_test_hooks (users cannot reach
// them: they live in lib/). Each is called with the pool's lock held, so it
// must not call into the pool, except state() and the like, which take no lock.
struct elastic_test_hooks {
  // Consulted before each worker thread is created; returning true makes the
  // creation fail as pthread_create does with EAGAIN.
  std::function<bool()> fail_thread_start;
  // Between the tidying and the terminated states: where Java runs a
  // ThreadPoolExecutor's terminated() (lib/blocking/bounded_elastic.cpp,
  // terminate_locked).
  std::function<void()> on_tidying;
};

struct elastic_worker {
  elastic_core* pool = nullptr;
  elastic_queue queue;      // jobs handed to this worker, oldest first (in elastic_core::backlog)
  bool live = false;        // a thread runs in this slot
  bool idle = false;        // on elastic_core's idle stack, at idle_pos
  bool baton = false;       // woken to pass the wake chain on (see pass_baton_locked)
  bool pending = false;     // in elastic_core's wake_pending list
  elastic_worker* wake_prev = nullptr;   // links in that list
  elastic_worker* wake_next = nullptr;
  std::uint32_t idle_pos = 0;            // where on the idle stack (idle_stack.hpp)
  // When it last went idle; its ttl runs from here. Its own thread's alone
  // (written and read only there), so it needs no lock.
  elastic_parker::clock::time_point idle_since;
  std::uint64_t seq = 0;    // the N of its thread's name NAME-N
  elastic_parker parker;    // where the thread sleeps when idle (any thread may unpark)
  std::thread thread;       // joined when the slot is reused, or by the pool's destructor
};

struct elastic_core {
  explicit elastic_core(elastic_options o);

  const elastic_options opt;
  std::stop_source stop;  // requested by shutdown_now(); its token goes to every job run

  // Counts the bounded_elastic and each run() awaiter holding the core.
  std::atomic<std::uint32_t> refs{1};
  // Written under `mu`, read without it by state()/is_shutdown().
  std::atomic<pool_state> state{pool_state::running};

  mutable brief_spin_mutex mu;  // what a section under it costs: the ground rules above
  std::condition_variable_any terminated_cv;            // signalled on reaching `terminated`
  std::vector<std::unique_ptr<elastic_worker>> slots;  // at most max_threads; grows, never shrinks
  // Idle workers: the most recently idle (the top) is reused first, so
  // surplus workers stay idle and age out by ttl (idle_stack.hpp).
  idle_stack<elastic_worker> idle;
  // The numbers of the slots whose thread has left, a min-heap: the next
  // thread starts in the lowest, as a scan in slot order would pick.
  std::vector<std::uint32_t> free_slots;
  elastic_backlog backlog;  // every queued job; its size() is the `queued` figure
  std::size_t live = 0, active = 0, largest = 0;
  std::uint64_t submitted = 0, completed = 0, rejected = 0, withdrawn = 0, returned = 0;  // see elastic_stats
  // The wake chain (lib/blocking/bounded_elastic.cpp, pass_baton_locked): workers
  // handed a job but not woken yet, oldest first, and how many woken workers
  // are still to pass the baton on (0 or 1 in practice). Invariant: if
  // wake_pending is not empty, batons > 0, so every one of them gets woken.
  // Doubly linked: a worker that wakes on its own (ttl) leaves it at once.
  elastic_worker* wake_pending_head = nullptr;
  elastic_worker* wake_pending_tail = nullptr;
  std::size_t batons = 0;
  std::uint64_t thread_seq = 0;  // threads started so far; names NAME-1, NAME-2, ...
  elastic_test_hooks hooks;      // empty but in tests
};

// For tests (which may include lib/'s headers; users cannot): a pool's core.
struct elastic_access {
  static elastic_core& core(bounded_elastic& p) noexcept { return *p.core_; }
};

// Sets the pool's test seams; best done before its first job.
void elastic_set_test_hooks(bounded_elastic& pool, elastic_test_hooks hooks);

// Checks, under the pool's lock, every invariant of the core's structures
// (the idle stack, the free slots, the backlog and its index, the counts)
// against a walk of every slot. Returns "" if all hold, else the first that
// does not. O(slots + queued): for tests, never called by the pool.
std::string elastic_audit(const elastic_core& c);

}  // namespace weft::detail
