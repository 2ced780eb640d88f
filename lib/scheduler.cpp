// lib/scheduler.cpp — scheduled jobs on a runtime's scheduling loop (its first
// loop); see weft/scheduled_handle.hpp for the rules and the reasons.
//
// A job's `phase` is touched by the scheduling loop only:
//   posted  → armed     the arm message arrived; the job is in the loop's list
//   armed   → running   its timer fired; one run task was started on the loop
//   running → armed     a periodic run finished and the next one is due
//   any     → done      once, finished, cancelled, failed or shut down; the
//                       loop's reference is dropped then
// Cancellation from any thread sets cancel_requested and posts one message;
// the loop acts on it in whichever phase it finds the job.
#include <weft/runtime.hpp>
#include <weft/scheduled_handle.hpp>
#include <weft/time.hpp>

#include "runtime_impl.hpp"
#include "scheduler_gate.hpp"

#include <new>

namespace weft::detail {

namespace {

struct job_message : sched_node {
  scheduled_job* job;
};

loop& scheduling_loop(runtime_impl* rt) noexcept { return *rt->loops.front(); }

void link(loop& l, scheduled_job* j) noexcept {
  j->prev = nullptr;
  j->next = l.scheduled_jobs;
  if (j->next) j->next->prev = j;
  l.scheduled_jobs = j;
}

void finish(scheduled_job* j) noexcept {
  loop& l = scheduling_loop(j->rt);
  if (j->at == scheduled_job::phase::armed || j->at == scheduled_job::phase::running) {
    if (j->prev) j->prev->next = j->next;
    else l.scheduled_jobs = j->next;
    if (j->next) j->next->prev = j->prev;
  }
  j->at = scheduled_job::phase::done;
  j->drop_ref();  // the scheduling loop's reference
}

void arm(scheduled_job* j) noexcept {
  j->at = scheduled_job::phase::armed;
  arm_timer(j, j->due);
}

clock::time_point saturating_add(clock::time_point t, clock::duration d) noexcept {
  if (t > clock::time_point::max() - d) return clock::time_point::max();
  return t + d;
}

// Finishes the job if its run is stopped (the runtime shuts down while the
// run is parked): a stopped run's frame is destroyed without reaching the
// code after its co_await.
struct finish_unless_released {
  scheduled_job* j;
  ~finish_unless_released() {
    if (j != nullptr) finish(j);
  }
};

task<void> run_job(scheduled_job* j) {
  finish_unless_released if_stopped{j};
  bool stop = false;
  try {
    co_await j->work->run();
  } catch (const cancelled&) {
    stop = true;  // the job threw cancelled itself: it ends, as a stopped task does, without a report
  } catch (...) {
    // Reported either way; a periodic job that throws runs no more unless it
    // was scheduled with periodic_error::report_and_continue.
    stop = j->on_error == periodic_error::stop;
    j->rt->errors->report(std::current_exception());
  }
  if_stopped.j = nullptr;
  // start_local kept this run on the scheduling loop, where `phase` lives.
  if (stop || j->how == scheduled_job::kind::once || j->cancel_requested.load(std::memory_order_acquire) ||
      scheduling_loop(j->rt).stopping()) {
    finish(j);
    co_return;
  }
  j->due = j->how == scheduled_job::kind::fixed_rate ? saturating_add(j->due, j->period)
                                                     : deadline_after(j->period);
  arm(j);  // an overrun fixed-rate job is already due: it runs at the next turn
}

void start_run(timer_node* n) noexcept {
  auto* j = static_cast<scheduled_job*>(n);
  if (j->cancel_requested.load(std::memory_order_acquire)) {
    finish(j);
    return;
  }
  j->at = scheduled_job::phase::running;
  join_cell<void>* s = make_spawn(run_job(j), j->rt->errors.p);
  start_node_local(&s->u.link);  // cannot throw on the loop thread
  s->detach();
}

void on_arm_message(sched_node* n) noexcept {
  auto* m = static_cast<job_message*>(n);
  scheduled_job* j = m->job;
  delete m;
  loop& l = scheduling_loop(j->rt);
  if (l.stopping() || j->cancel_requested.load(std::memory_order_acquire)) {
    finish(j);
    return;
  }
  link(l, j);
  j->fire = &start_run;
  arm(j);
}

void on_cancel_message(sched_node* n) noexcept {
  auto* m = static_cast<job_message*>(n);
  scheduled_job* j = m->job;
  delete m;
  if (j->at == scheduled_job::phase::armed) {
    disarm_timer(j);  // O(1): the timer goes at once
    finish(j);
  }
  // posted: the arm message sees the flag; running: the run sees it when it ends.
  j->drop_ref();  // this message's reference
}

void post_to_scheduler(runtime_impl* rt, sched_node* n) noexcept {
  loop& l = scheduling_loop(rt);
  if (this_thread().current_loop == &l) l.push_local(n);
  else l.post(n);
}

}  // namespace

scheduled_job::~scheduled_job() {
  if (gate != nullptr) gate->drop_ref();
}

void schedule_job(runtime_impl* rt, scheduled_job* job) {
  scheduler_gate* g = rt->gate.p;
  if (rt->stopping.load() || !g->enter())
    throw rejected_execution("weft: schedule refused: the runtime is shutting down");
  auto* m = new (std::nothrow) job_message;
  if (m == nullptr) {
    g->leave();
    throw std::bad_alloc();
  }
  g->add_ref();
  job->gate = g;
  m->run = &on_arm_message;
  m->job = job;
  post_to_scheduler(rt, m);
  g->leave();
}

void cancel_job(scheduled_job* job) noexcept {
  // acq_rel: the scheduling loop reads the flag with acquire.
  if (job->cancel_requested.exchange(true, std::memory_order_acq_rel)) return;
  scheduler_gate* g = job->gate;
  // Closed: the runtime has shut down (or is about to quit its loops) and
  // has finished every job; there is nobody to tell.
  if (g == nullptr || !g->enter()) return;
  job_message* m = new (std::nothrow) job_message;
  if (m == nullptr) {  // out of memory: the flag alone stops it at its next fire
    g->leave();
    return;
  }
  job->add_ref();
  m->run = &on_cancel_message;
  m->job = job;
  post_to_scheduler(g->rt, m);
  g->leave();
}

void drop_scheduled_jobs(loop& l) noexcept {
  for (scheduled_job* j = l.scheduled_jobs; j != nullptr;) {
    scheduled_job* next = j->next;
    if (j->at == scheduled_job::phase::armed) {
      disarm_timer(j);
      finish(j);
    }
    j = next;
  }
}

}  // namespace weft::detail
