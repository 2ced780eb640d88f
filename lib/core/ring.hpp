// lib/core/ring.hpp — one io_uring, as a loop uses it.
//
// Owns the ring and its submission discipline: a caller asks for an SQE and
// always gets one (a full queue is flushed, and completions reaped, until one
// is free), and a submission that fails with EBUSY, EAGAIN or EINTR is retried
// after reaping, so no SQE is ever dropped. Completions carry a `completion*`
// in user_data; its callback runs from reap() and must not submit (it runs
// while the ring may be in the middle of making room).
#pragma once

#include <liburing.h>

#include <cstdint>

#include <weft/detail/ring_faults.hpp>

namespace weft::detail {

struct completion {
  void (*complete)(completion*, int res) noexcept = nullptr;
};

class ring {
 public:
  // Throws std::system_error naming the cause (e.g. ENOMEM, EPERM, EINVAL).
  ring(unsigned entries, ring_faults* faults);
  ~ring();
  ring(const ring&) = delete;
  ring& operator=(const ring&) = delete;

  // Never null: when the queue is full, submits what is queued and reaps.
  io_uring_sqe* sqe(completion* c) noexcept;
  // Submits every queued SQE; retries EBUSY/EAGAIN/EINTR after reaping.
  void flush() noexcept;
  // Submits and sleeps until at least one completion arrives (or a signal).
  void submit_and_wait() noexcept;
  // Runs the callbacks of every completion already posted; returns how many.
  unsigned reap() noexcept;
  bool has_completions() noexcept { return io_uring_cq_ready(&ring_) > 0; }

 private:
  int submit(unsigned wait_nr) noexcept;
  io_uring ring_{};
  ring_faults* faults_;
};

}  // namespace weft::detail
