// lib/core/runtime_impl.hpp — what a runtime owns: its loops, their threads, the
// blocking pool, and the shutdown sequence.
//
// Counting live tasks without a shared hot counter: each loop counts the
// contexts spawned from its thread and the contexts that finished on it
// (single-writer atomics, see loop::bump); plain threads count their spawns in
// `foreign_spawned`. A spawn is counted before it is queued, so it happens
// before its own completion; live() reads every completion counter first and
// every spawn counter after, and so never reports zero while a task is alive.
//
// Wakers from outside (a pool thread finishing a job, a plain thread's spawn
// or cancel, another runtime's loop) publish a node (into the inject queue,
// or a loop's inbox) and then kick a loop: between the two, the woken task may finish, block_on return and the
// runtime be destroyed. So each such waker is counted in `outside_wakers`
// from before it publishes until after it kicks, and ~runtime_impl waits for
// the count to drain before the loops (their eventfds) go. A loop of this
// runtime needs no count: its thread is joined before anything is destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <weft/runtime.hpp>

#include "core/loop.hpp"
#include "time/scheduler_gate.hpp"

namespace weft::detail {

// Disarms and finishes the scheduled jobs still armed (at shutdown, after
// the runtime is marked stopping; lib/time/scheduler.cpp).
void drop_scheduled_jobs(runtime_impl& rt) noexcept;

class runtime_impl {
 public:
  runtime_impl(runtime& pub, runtime_options opts, ring_faults* faults);  // faults: tests only, else null
  ~runtime_impl();

  void spawn(sched_node* n);               // any thread; n->run claims it
  // Queue runnable work from a thread that is not one of this runtime's
  // loops (a pool thread's wake, a plain thread's spawn); any loop takes it.
  void inject(sched_node* n) noexcept;
  void wake_idle_peer(loop* from) noexcept;
  std::size_t steal_into(loop& thief, run_queue& out, std::size_t max) noexcept;
  bool any_work() const noexcept;  // the inject queue or any loop's run queue
  std::uint64_t live() const noexcept;
  void shutdown();
  // shutdown() that waits at most `limit`; false when tasks or pool jobs were
  // still running then (the runtime is then abandoned: see ~runtime).
  bool shutdown_for(std::chrono::nanoseconds limit);
  bool abandoned() const noexcept { return abandoned_.load(); }
  runtime_stats stats() const;

  runtime& pub;
  runtime_options opts;
  std::vector<std::unique_ptr<loop>> loops;
  steal_queue inject_queue;
  std::atomic<unsigned> sleepers{0};
  std::atomic<bool> stopping{false};
  // Outside wakers between publishing and kicking (see above). seq_cst
  // increment before the publish, release decrement after the kick; the
  // destructor's acquire load pairs with the latter.
  // On its own cache line: pool workers write it twice per wake they
  // deliver, and the fields around it are read by the loops on every
  // offload. Sharing a line made W4b depend on sizeof(runtime_options):
  // 32 bytes fewer there cost it about 12% (3.5M against 4.0M offloads/s).
  alignas(64) std::atomic<unsigned> outside_wakers{0};
  // The runtime's reference to something counted that may outlive it;
  // dropped when the runtime goes (or its constructor fails).
  template <class T>
  struct shared_ref {
    T* p;
    ~shared_ref() { p->drop_ref(); }
    T* operator->() const noexcept { return p; }
    operator T*() const noexcept { return p; }
  };
  alignas(64) shared_ref<error_sink> errors;  // shared with join handles that hold failed outcomes
  bounded_elastic pool;
  shared_ref<scheduler_gate> gate;  // shared with scheduled jobs

 private:
  std::vector<std::thread> threads_;
  std::atomic<std::uint64_t> foreign_spawned_{0};
  std::mutex shutdown_mu_;
  bool joined_ = false;
  std::atomic<bool> abandoned_{false};  // a shutdown_for ran out of time
};

}  // namespace weft::detail
