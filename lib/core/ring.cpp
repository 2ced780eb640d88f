// lib/core/ring.cpp — see ring.hpp. The retry loops here are the only place weft
// talks to io_uring_submit, so the fault seam (ring_faults) sits here too.
#include "core/ring.hpp"

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

namespace weft::detail {

ring::ring(unsigned entries, ring_faults* faults) : faults_(faults) {
  int rc = 0;
  if (faults_ && faults_->setup_errno.load(std::memory_order_relaxed) != 0)
    rc = -faults_->setup_errno.load(std::memory_order_relaxed);
  else
    rc = io_uring_queue_init(entries, &ring_, 0);
  if (rc < 0) {
    std::string why = "weft: cannot set up an io_uring with " + std::to_string(entries) + " entries";
    if (rc == -EPERM) why += " (io_uring is disabled here: see /proc/sys/kernel/io_uring_disabled)";
    if (rc == -ENOMEM) why += " (locked-memory limit too low: raise RLIMIT_MEMLOCK or use fewer ring_entries)";
    if (rc == -EINVAL) why += " (too many entries: use ring_entries <= 32768)";
    throw std::system_error(-rc, std::system_category(), why);
  }
}

ring::~ring() { io_uring_queue_exit(&ring_); }

io_uring_sqe* ring::sqe(completion* c) noexcept {
  for (;;) {
    io_uring_sqe* s = nullptr;
    if (!(faults_ && faults_->take(faults_->full_sqes))) s = io_uring_get_sqe(&ring_);
    if (s != nullptr) {
      io_uring_sqe_set_data(s, c);
      return s;
    }
    // Full: hand the queued SQEs to the kernel, which frees their slots.
    flush();
    reap();
  }
}

int ring::submit(unsigned wait_nr) noexcept {
  if (faults_ && faults_->take(faults_->failed_submits))
    return -faults_->submit_errno.load(std::memory_order_relaxed);
  return wait_nr ? io_uring_submit_and_wait(&ring_, wait_nr) : io_uring_submit(&ring_);
}

void ring::flush() noexcept {
  while (io_uring_sq_ready(&ring_) > 0) {
    int rc = submit(0);
    if (rc >= 0 || rc == -EINTR) continue;
    // EBUSY: the completion queue is overflowing; EAGAIN: the kernel is short
    // of memory for now. Either way, draining completions is what helps.
    reap();
    if (rc == -EAGAIN) std::this_thread::yield();
  }
}

void ring::submit_and_wait() noexcept {
  for (;;) {
    int rc = submit(1);
    if (rc >= 0 || rc == -EINTR || rc == -ETIME) return;
    reap();
    if (io_uring_cq_ready(&ring_) > 0) return;  // something to do already
    if (rc == -EAGAIN) std::this_thread::yield();
  }
}

unsigned ring::reap() noexcept {
  unsigned n = 0;
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
    auto* c = static_cast<completion*>(io_uring_cqe_get_data(cqe));
    int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    if (c != nullptr) c->complete(c, res);
    ++n;
  }
  return n;
}

}  // namespace weft::detail
