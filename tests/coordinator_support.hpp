// tests/coordinator_support.hpp — what the coordinator's and tenants' test
// files share (test_coordinator, test_coordinator_mixes,
// test_coordinator_blocking, test_tenants): limits in one call, a suspension
// point the test opens from any thread, jobs held at it that count how many
// are inside, and the figures that say the coordinator has settled.
//
// Orderings are forced with task gates and by waiting for the coordinator's
// own figures; timed waits only catch hangs.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <weft/coordinator.hpp>
#include <weft/detail/context.hpp>
#include <weft/errors.hpp>
#include <weft/join_handle.hpp>
#include <weft/task.hpp>

#include "support.hpp"

namespace test {

// These files' "did not hang" bound, passed to test::eventually: the 20 s
// the coordinator tests have always used, longer than test::generous.
inline constexpr auto hang_limit = std::chrono::seconds(20);

inline weft::coordinator_options limits(std::size_t concurrency, std::size_t queue, std::string name = {}) {
  weft::coordinator_options o;
  o.max_concurrency = concurrency;
  o.max_queue = queue;
  o.name = std::move(name);
  return o;
}

struct job_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A suspension point tasks co_await until the test opens it, from any
// thread; once open it stays open. (test::gate, in pool_support.hpp, is the
// blocking kind that pool jobs wait on.) It follows the protocol of
// weft/detail/context.hpp: a waiter parks with a cancel hook, and exactly one
// of open() and the hook wakes it (whoever takes it off the list).
class task_gate {
 public:
  class waiter : weft::detail::cancel_hook {
   public:
    explicit waiter(task_gate* g) noexcept : g_(g) { on_cancel = &cancel; }
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) {
      ctx_ = weft::detail::current_context();
      if (weft::detail::is_cancelled(ctx_)) {
        cancelled_ = true;
        return false;
      }
      std::lock_guard<std::mutex> l(g_->mu_);
      if (g_->open_) return false;
      ctx_->resume_point = h;
      ctx_->hook = this;
      g_->waiters_.push_back(this);
      return true;
    }
    void await_resume() const {
      if (cancelled_) throw weft::cancelled{};
    }

   private:
    friend class task_gate;
    static void cancel(weft::detail::cancel_hook* hk) noexcept {
      auto* self = static_cast<waiter*>(hk);
      {
        std::lock_guard<std::mutex> l(self->g_->mu_);
        auto& ws = self->g_->waiters_;
        auto it = std::find(ws.begin(), ws.end(), self);
        if (it == ws.end()) return;  // open() took it: its wake is the one
        ws.erase(it);
      }
      self->cancelled_ = true;
      weft::detail::wake(self->ctx_);
    }
    task_gate* g_;
    weft::detail::task_context* ctx_ = nullptr;
    bool cancelled_ = false;
  };

  waiter wait() noexcept { return waiter(this); }
  void open() {
    std::vector<waiter*> ws;
    {
      std::lock_guard<std::mutex> l(mu_);
      open_ = true;
      ws.swap(waiters_);
    }
    for (waiter* w : ws) weft::detail::wake(w->ctx_);
  }
  std::size_t waiting() {
    std::lock_guard<std::mutex> l(mu_);
    return waiters_.size();
  }

 private:
  std::mutex mu_;
  bool open_ = false;
  std::vector<waiter*> waiters_;
};

// Counts the jobs inside a section and remembers the most at once.
struct occupancy {
  std::atomic<int> inside{0}, most{0}, entered{0};
  void enter() {
    ++entered;
    int now = ++inside;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
  }
  void leave() { --inside; }
};

// A job that counts itself in `occ` while it waits at `g`, then returns `v`.
inline auto gated_job(task_gate& g, occupancy& occ, int v) {
  return [&g, &occ, v]() -> weft::task<int> {
    occ.enter();
    try {
      co_await g.wait();
    } catch (...) {
      occ.leave();
      throw;
    }
    occ.leave();
    co_return v;
  };
}

// A caller whose job waits at `g` inside the coordinator, then returns `v`.
inline weft::task<int> gated_call(weft::coordinator& c, task_gate& g, occupancy& occ, int v) {
  co_return co_await c.execute(gated_job(g, occ, v));
}

inline bool settled(const weft::coordinator_stats& s, std::size_t running, std::size_t queued) {
  return s.running == running && s.queued == queued;
}

// Joins every handle from this thread: how many ended with a value, how many stopped.
struct endings {
  int values = 0, stopped = 0;
};
inline endings endings_of(std::vector<weft::join_handle<int>>& hs) {
  endings e;
  for (auto& h : hs) {
    const std::string how = outcome_of(h);
    e.values += how == "value";
    e.stopped += how == "cancelled";
  }
  return e;
}

}  // namespace test
