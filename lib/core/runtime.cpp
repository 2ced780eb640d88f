// lib/core/runtime.cpp — the runtime's life: options checked, rings set up before
// any thread starts (so a setup failure is a constructor exception), threads
// started, spawns routed, and shutdown: refuse, cancel, wait, join.
#include "core/runtime_impl.hpp"
#include "core/unobserved.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace weft {

namespace detail {

namespace {
runtime_options checked(runtime_options o) {
  if (o.ring_entries == 0)
    throw std::invalid_argument("weft: runtime_options::ring_entries must be at least 1 (the default is 256)");
  // (0, 1 s]: a tick is the wheel's resolution, and every sleep is rounded up
  // to it; a coarser one would make a 1 ms sleep take seconds.
  if (o.timer_tick <= std::chrono::nanoseconds::zero() || o.timer_tick > std::chrono::seconds(1))
    throw std::invalid_argument(
        "weft: runtime_options::timer_tick must be in (0, 1 s]; it is the timer wheel's resolution (the default "
        "is 1 ms)");
  if (o.loops == 0) o.loops = cores();
  return o;
}

// The pool reports a failed execute()d job where the runtime reports a
// failed detached task, unless the pool was given a handler of its own.
elastic_options pool_options(const runtime_options& o, error_sink* sink) {
  elastic_options e = o.blocking;
  if (!e.on_error) e.on_error = [sink](std::exception_ptr ex) { sink->report(std::move(ex)); };
  return e;
}
}  // namespace

runtime_impl::runtime_impl(runtime& p, runtime_options o, ring_faults* faults) : pub(p), opts(checked(std::move(o))), errors{new error_sink}, pool(pool_options(opts, errors.p)), gate{new scheduler_gate(this)} {
  errors->on_error = opts.on_error;
  loops.reserve(opts.loops);
  for (unsigned i = 0; i < opts.loops; ++i)
    loops.push_back(std::make_unique<loop>(*this, i, opts.ring_entries, opts.timer_tick, faults));
  threads_.reserve(opts.loops);
  try {
    for (auto& l : loops) {
      threads_.emplace_back([lp = l.get()] { lp->run(); });
      std::string name = "weft-loop-" + std::to_string(l->index);
      pthread_setname_np(threads_.back().native_handle(), name.c_str());
    }
  } catch (...) {
    // No task can exist yet: stop the loops that did start and report.
    for (auto& l : loops) l->quit();
    for (auto& t : threads_) t.join();
    throw;
  }
}

runtime_impl::~runtime_impl() {
  shutdown();
  // A waker from outside may still be inside loop::post or inject,
  // touching a loop after the task it woke has already finished: the loops
  // (and their eventfds) go only once it has left. The wait is the length of
  // one eventfd write.
  while (outside_wakers.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void runtime_impl::spawn(sched_node* ctx) {
  loop* cur = this_thread().current_loop;
  if (cur != nullptr && &cur->rt == this) {
    if (stopping.load(std::memory_order_relaxed))
      throw rejected_execution("weft: spawn refused: the runtime is shutting down");
    cur->count_spawn();
    cur->push_spawn(ctx);
    return;
  }
  // seq_cst, both: counted before the check, so shutdown() either refuses this
  // spawn here or sees it counted and waits for it (a Dekker handshake).
  foreign_spawned_.fetch_add(1);
  if (stopping.load()) {
    foreign_spawned_.fetch_sub(1);
    throw rejected_execution("weft: spawn refused: the runtime is shutting down");
  }
  inject(ctx);
}

void runtime_impl::inject(sched_node* n) noexcept {
  outside_wakers.fetch_add(1);  // seq_cst: before the node can be seen
  inject_queue.push(n);         // seq_cst size: the pusher's half of the sleep handshake
  wake_idle_peer(nullptr);
  // release: as in loop::outside_wake.
  outside_wakers.fetch_sub(1, std::memory_order_release);
}

void runtime_impl::wake_idle_peer(loop* from) noexcept {
  // seq_cst: pairs with loop::sleep's increment; a loop going to sleep after
  // this read re-checks every run queue itself.
  if (sleepers.load() == 0) return;
  for (auto& l : loops) {
    if (l.get() != from && l->sleeping.load()) {
      l->kick();
      return;
    }
  }
}

std::size_t runtime_impl::steal_into(loop& thief, run_queue& out, std::size_t max) noexcept {
  const std::size_t n = loops.size();
  for (std::size_t k = 1; k < n; ++k) {
    loop& victim = *loops[(thief.index + k) % n];
    for (steal_queue* q : {&victim.runq, &victim.yielded}) {
      std::size_t avail = q->size();
      if (avail == 0) continue;
      if (std::size_t got = q->take(out, std::min(max, (avail + 1) / 2))) return got;
    }
  }
  return 0;
}

bool runtime_impl::any_work() const noexcept {
  if (inject_queue.size() > 0) return true;
  for (auto& l : loops)
    if (l->runq.size() > 0 || l->yielded.size() > 0) return true;
  return false;
}

std::uint64_t runtime_impl::live() const noexcept {
  std::uint64_t done = 0, started = 0;
  for (auto& l : loops) done += l->completed.load(std::memory_order_acquire);
  started = foreign_spawned_.load();
  for (auto& l : loops) started += l->spawned.load(std::memory_order_acquire);
  return started - done;
}

void runtime_impl::shutdown() { shutdown_for(std::chrono::nanoseconds::max()); }

bool runtime_impl::shutdown_for(std::chrono::nanoseconds limit) {
  using steady = std::chrono::steady_clock;
  const auto start = steady::now();
  const bool forever = limit >= steady::time_point::max() - start;
  const auto deadline = forever ? steady::time_point::max() : start + limit;
  if (!stopping.exchange(true)) {
    for (auto& l : loops) l->begin_stop();
    drop_scheduled_jobs(*this);
  }
  loop* cur = this_thread().current_loop;
  if (cur != nullptr && &cur->rt == this) return false;  // cannot wait for ourselves
  std::lock_guard<std::mutex> g(shutdown_mu_);
  if (!joined_) {
    // Cancelled tasks stop on their loops (a task awaiting a running offload
    // stops only once the job returns); a millisecond poll is fine for a
    // once-per-runtime wait, and needs no wake-up path from every completion.
    while (live() != 0) {
      if (steady::now() >= deadline) {
        abandoned_ = true;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    gate->close();  // a schedule or cancel racing us has posted by now, or never will
    for (auto& l : loops) l->quit();
    for (auto& t : threads_) t.join();
    joined_ = true;
    pool.shutdown();
  }
  const auto left = forever ? std::chrono::nanoseconds::max()
                            : std::max<std::chrono::nanoseconds>(deadline - steady::now(), std::chrono::nanoseconds::zero());
  if (pool.await_termination(left)) {
    abandoned_ = false;
    return true;
  }
  abandoned_ = true;  // a fire-and-forget pool job is still running
  return false;
}

runtime_stats runtime_impl::stats() const {
  runtime_stats s;
  for (auto& l : loops) {
    s.completed += l->completed.load(std::memory_order_acquire);
    s.timers += l->armed_timers.load(std::memory_order_relaxed);
    s.queued_per_loop.push_back(l->queued.load(std::memory_order_relaxed));
  }
  s.spawned = foreign_spawned_.load();
  for (auto& l : loops) s.spawned += l->spawned.load(std::memory_order_acquire);
  s.live_tasks = static_cast<std::size_t>(s.spawned - s.completed);
  return s;
}

// ---- the runtime glue join_handle.hpp declares ------------------------------

runtime_impl* resolve_runtime(runtime_impl* rt) {
  if (rt != nullptr) return rt;
  loop* l = this_thread().current_loop;
  if (l == nullptr)
    throw std::logic_error("weft: spawn() called off a loop thread; use runtime::spawn or runtime::block_on");
  return &l->rt;
}

void spawn_node(runtime_impl* rt, sched_node* n) { rt->spawn(n); }

void count_unclaimed_end() noexcept { this_thread().current_loop->count_completion(); }

error_sink* error_sink_of(runtime_impl* rt) noexcept { return rt->errors.p; }

void error_sink::report(std::exception_ptr e) noexcept { report_unobserved(on_error, e, "a detached task"); }


}  // namespace detail

runtime::runtime(runtime_options o) : runtime(std::move(o), nullptr) {}
runtime::runtime(runtime_options o, detail::ring_faults* faults)
    : impl_(std::make_unique<detail::runtime_impl>(*this, std::move(o), faults)) {}
runtime::~runtime() {
  // Destroying a runtime on one of its own loop threads would join that very
  // thread (std::terminate, with no word why). Like Tokio's "Cannot drop a
  // runtime in a context where blocking is not allowed": say what was done
  // wrong and what to do instead, then abort; no later state is trustworthy.
  detail::loop* cur = detail::this_thread().current_loop;
  if (cur != nullptr && &cur->rt == impl_.get()) {
    std::fprintf(stderr,
                 "weft: a runtime was destroyed on one of its own loop threads (from a task it runs). It cannot "
                 "wait for itself there. Destroy it from the thread that created it, after block_on returns or "
                 "after shutdown() from outside its loops. Aborting.\n");
    std::fflush(stderr);
    std::abort();
  }
  if (impl_->abandoned()) {
    // A shutdown_for ran out of time: work is still running on this
    // runtime's threads and must find its loops, pool and frames intact. The
    // runtime is handed to a thread of its own that finishes the shutdown
    // whenever that work ends, then frees it (or the process exits first).
    std::thread([impl = impl_.release()] {
      impl->shutdown();
      delete impl;
    }).detach();
    return;
  }
  impl_->shutdown();
}
bounded_elastic& runtime::blocking() noexcept { return impl_->pool; }
unsigned runtime::loops() const noexcept { return static_cast<unsigned>(impl_->loops.size()); }
void runtime::shutdown() { impl_->shutdown(); }
bool runtime::shutdown_for(clock::duration limit) {
  return impl_->shutdown_for(std::max(std::chrono::duration_cast<std::chrono::nanoseconds>(limit),
                                      std::chrono::nanoseconds::zero()));
}
runtime_stats runtime::stats() const { return impl_->stats(); }

runtime* runtime::current() noexcept {
  detail::loop* l = detail::this_thread().current_loop;
  return l ? &l->rt.pub : nullptr;
}
bool runtime::on_loop_thread() noexcept { return detail::this_thread().current_loop != nullptr; }

}  // namespace weft
