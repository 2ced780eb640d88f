// lib/time/scheduler.cpp — scheduled jobs; see weft/scheduled_handle.hpp for the
// rules and the reasons.
//
// Every job's timer sits on the runtime's first loop's wheel, whose (deadline,
// arm order) firing order gives "equal due times in submission order"
// whichever loop scheduled them. The fire runs on whichever loop advances
// that wheel (the first loop, or a peer standing in while it is busy) and
// starts the run there, at the back of that loop's own queue, so runs that
// fire together start in order; after that a run moves like any task.
//
// A job's `phase` and the list of jobs not done are under the gate's mutex
// (lib/time/scheduler_gate.hpp), taken by whoever acts on a job: the scheduling
// call, cancel(), a run's start and end, shutdown. The fire itself runs under
// the wheel's lock and so takes no other lock: it only starts the run, which
// takes the mutex first thing.
//   armed   → running   the run started (its timer fired)
//   running → armed     a periodic run finished and the next one is due
//   any     → done      once: finished, cancelled, failed or shut down; the
//                       scheduler's reference is dropped then
#include <weft/runtime.hpp>
#include <weft/scheduled_handle.hpp>
#include <weft/time.hpp>
#include <weft/yield.hpp>

#include "core/runtime_impl.hpp"
#include "time/scheduler_gate.hpp"

#include <mutex>

namespace weft::detail {

namespace {

loop& scheduling_loop(runtime_impl* rt) noexcept { return *rt->loops.front(); }

// Under the gate's mutex.
void link(scheduler_gate& g, scheduled_job* j) noexcept {
  j->prev = nullptr;
  j->next = g.jobs;
  if (j->next) j->next->prev = j;
  g.jobs = j;
}

// Under the gate's mutex.
void finish(scheduler_gate& g, scheduled_job* j) noexcept {
  if (j->at == scheduled_job::phase::done) return;
  if (j->prev) j->prev->next = j->next;
  else g.jobs = j->next;
  if (j->next) j->next->prev = j->prev;
  j->at = scheduled_job::phase::done;
  j->drop_ref();  // the scheduler's reference
}

// Under the gate's mutex, from a loop thread or a pinned caller.
void arm(scheduled_job* j) noexcept {
  j->at = scheduled_job::phase::armed;
  loop& l = scheduling_loop(j->rt);
  arm_timer_on(l, j, j->due);
  // It may be asleep with a later wake-up armed: let it look again.
  if (this_thread().current_loop != &l) l.kick();
}

// The job a run belongs to. A parameter of run_job, so it lives in the frame
// from the spawn on: a run dropped unrun at shutdown, or stopped while
// parked, finishes its job as the frame goes (code after a stopped co_await
// never runs).
struct run_ticket {
  scheduled_job* j;
  std::uint64_t turn;  // this run's place in firing order
  run_ticket(scheduled_job* job, std::uint64_t n) noexcept : j(job), turn(n) {}
  run_ticket(run_ticket&& o) noexcept : j(std::exchange(o.j, nullptr)), turn(o.turn) {}
  ~run_ticket() {
    if (j == nullptr) return;
    std::lock_guard<std::mutex> g(j->gate->mu);
    finish(*j->gate, j);
  }
};

bool shutting_down(scheduled_job* j) noexcept { return j->rt->stopping.load(); }

task<void> run_job(run_ticket t) {
  scheduled_job* j = t.j;
  scheduler_gate& gate = *j->gate;
  // Runs start in the order their timers fired, whichever loops they were
  // fired on or stolen by: each waits for the run fired before it to have
  // started. A plain callable counts as started once it has returned (it
  // never suspends, so that costs its successor nothing it would not wait
  // for anyway on one loop); a task-returning one once its task is about to
  // start. (acquire: pairs with the release in next_may_start; a yield is
  // cheap, and the wait is one hand-over long.)
  while (gate.started.load(std::memory_order_acquire) != t.turn) co_await weft::yield();
  struct next_may_start {
    scheduler_gate* g;
    void now() noexcept {
      // release: this run's start happens before the next one's.
      if (g) std::exchange(g, nullptr)->started.fetch_add(1, std::memory_order_release);
    }
    ~next_may_start() { now(); }  // also when the run ends early or is stopped
  } pass{&gate};
  {
    std::lock_guard<std::mutex> g(gate.mu);
    if (j->cancel_requested.load(std::memory_order_acquire) || shutting_down(j)) co_return;  // t finishes it
    j->at = scheduled_job::phase::running;
  }
  bool stop = false;
  try {
    if (j->work->suspends) pass.now();
    co_await j->work->run();
  } catch (const cancelled&) {
    stop = true;  // the job threw cancelled itself: it ends, as a stopped task does, without a report
  } catch (...) {
    // Reported either way; a periodic job that throws runs no more unless it
    // was scheduled with periodic_error::report_and_continue.
    stop = j->on_error == periodic_error::stop;
    j->rt->errors->report(std::current_exception());
  }
  pass.now();
  std::lock_guard<std::mutex> g(gate.mu);
  if (stop || j->how == scheduled_job::kind::once || j->cancel_requested.load(std::memory_order_acquire) ||
      shutting_down(j))
    co_return;  // t finishes it
  j->due = j->how == scheduled_job::kind::fixed_rate ? saturating_add(j->due, j->period)
                                                     : deadline_after(j->period);
  arm(j);  // an overrun fixed-rate job is already due: it runs at the next turn
  t.j = nullptr;
}

// The job's timer fired (under the wheel's lock, on the loop that fired it).
void start_run(timer_node* n) noexcept {
  auto* j = static_cast<scheduled_job*>(n);
  // Every job's timer is on one wheel, whose lock is held here: `fired`
  // counts the fires in their order.
  const std::uint64_t turn = j->gate->fired++;
  join_cell<void>* s = make_spawn(run_job(run_ticket(j, turn)), j->rt->errors.p);
  start_node_local(&s->u.link);  // cannot throw on a loop thread
  s->detach();
}

}  // namespace

scheduled_job::~scheduled_job() {
  if (gate != nullptr) gate->drop_ref();
}

void schedule_job(runtime_impl* rt, scheduled_job* job) {
  scheduler_gate* g = rt->gate.p;
  if (rt->stopping.load() || !g->enter())
    throw rejected_execution("weft: schedule refused: the runtime is shutting down");
  g->add_ref();
  job->gate = g;
  job->fire = &start_run;
  {
    std::lock_guard<std::mutex> lk(g->mu);
    if (rt->stopping.load()) {
      g->leave();
      throw rejected_execution("weft: schedule refused: the runtime is shutting down");
    }
    link(*g, job);
    arm(job);
  }
  g->leave();
}

void cancel_job(scheduled_job* job) noexcept {
  // acq_rel: a run's start and end read the flag with acquire.
  if (job->cancel_requested.exchange(true, std::memory_order_acq_rel)) return;
  scheduler_gate* g = job->gate;
  // Closed: the runtime has shut down (or is about to quit its loops) and
  // has finished every job; there is nobody to tell.
  if (g == nullptr || !g->enter()) return;
  {
    std::lock_guard<std::mutex> lk(g->mu);
    // Armed: the timer goes at once. If it has fired, the run it started
    // sees the flag; a running run sees it when it ends.
    if (job->at == scheduled_job::phase::armed && disarm_timer(job)) finish(*g, job);
  }
  g->leave();
}

void drop_scheduled_jobs(runtime_impl& rt) noexcept {
  scheduler_gate& g = *rt.gate.p;
  std::lock_guard<std::mutex> lk(g.mu);
  for (scheduled_job* j = g.jobs; j != nullptr;) {
    scheduled_job* next = j->next;
    if (j->at == scheduled_job::phase::armed && disarm_timer(j)) finish(g, j);
    j = next;
  }
}

}  // namespace weft::detail
