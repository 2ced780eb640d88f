// weft/detail/coord_ticket.hpp — coord_ticket, the admission awaitable of
// every coordinator and tenants job. Its members are defined in
// lib/tenants/coordinator.cpp, next to the state they work on; the ground rules of
// the queue and of the work-in-progress word are in lib/tenants/coordinator_state.hpp.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>

#include <weft/detail/context.hpp>

namespace weft::detail {

struct coordinator_state;  // lib/tenants/coordinator_state.hpp

// One job's passage through a coordinator, living in the job's frame: it is
// the admission awaitable, the queue link, the cancel hook while queued, and
// the slot it holds while running. Its destructor gives back whatever it
// holds, so every way out of the frame (co_return, an exception, a cancelled
// wait) releases the job's work in progress, and `retired_` makes that
// release happen exactly once.
//
// Who wakes a queued job, exactly once: the job that frees a slot (the
// grant), or the cancel hook (the withdrawal). Both decide under the
// coordinator's mutex by moving `phase` out of `queued`; the loser does nothing.
class coord_ticket final : cancel_hook {
 public:
  enum class phase : std::uint8_t {
    outside,    // not admitted (not yet awaited, refused, or cancelled first): holds nothing
    queued,     // admitted, in the FIFO queue
    granted,    // holds a running slot
    withdrawn,  // admitted, left the queue (or a granted slot) without running
  };

  explicit coord_ticket(coordinator_state* s) noexcept : state_(s) { on_cancel = &cancel_while_queued; }
  coord_ticket(const coord_ticket&) = delete;
  coord_ticket& operator=(const coord_ticket&) = delete;
  ~coord_ticket() {
    if (phase_ != phase::outside) leave();
  }

  bool await_ready() const noexcept { return false; }
  // Queues the job (true), or does not suspend (false): the job was granted a
  // slot, or refused. A caller already cancelled is not admitted and stops
  // (true). std::logic_error outside a weft task.
  bool await_suspend(std::coroutine_handle<> h);
  // Throws too_many_tasks if refused; otherwise the job holds a slot and runs.
  void await_resume();
  // Where the job counts as started (else its granted slot goes back unrun,
  // counted withdrawn): run_coordinated sets it before a coroutine job runs,
  // and a blocking job sets it on the pool thread (start_marked).
  bool* ran_flag() noexcept { return &ran_; }

 private:
  friend struct coordinator_state;
  static void cancel_while_queued(cancel_hook* h) noexcept;
  void leave() noexcept;  // the frame ends: gives back the slot it held, then retires
  void retire() noexcept;

  coordinator_state* state_;
  task_context* ctx_ = nullptr;
  // The queue links and phase_ (while the ticket is queued) are guarded by
  // the coordinator's mutex; once the task is resumed phase_ is its own.
  coord_ticket* prev_ = nullptr;
  coord_ticket* next_ = nullptr;
  phase phase_ = phase::outside;
  bool closed_out_ = false;  // refused because the coordinator is closed
  bool ran_ = false;  // the job started (see ran_flag)
  std::size_t refused_at_ = 0;    // refused: the work in progress it would have made
  // The job's unit of work in progress has been given back. A CAS from false
  // is the only way to give it back, so it happens once whatever path (the
  // frame ending, a withdrawal) gets there first.
  std::atomic<bool> retired_{false};
};

}  // namespace weft::detail
