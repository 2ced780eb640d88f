// weft/errors.hpp — the exceptions weft throws at its users.
//
// Every error a caller can cause is one of these (or a std::invalid_argument /
// std::logic_error / std::system_error from a constructor or a misuse), each
// with a message that says what happened and what to do about it.
#pragma once

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>

namespace weft {

// What was awaited *stopped* (cancel.hpp): `co_await h` on a task that was
// cancelled (join_handle::cancel, an enclosing timeout, a lease expiry,
// runtime shutdown), runtime::block_on of one, outcome::value() of one.
// Never thrown inside the cancelled task itself: that task stops. A task body
// that throws it ends stopped. Deliberately not a runtime_error.
class cancelled : public std::exception {
 public:
  const char* what() const noexcept override { return "weft: the task was cancelled"; }
};

// timeout(d, t) ran out; t has stopped and its frames are gone.
class timed_out : public std::runtime_error {
 public:
  timed_out() : std::runtime_error("weft: the operation timed out and was cancelled") {}
  using std::runtime_error::runtime_error;
};

// A pool, runtime or coordinator cannot take the work (saturated or shut down).
class rejected_execution : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A coordinator's work in progress would exceed its limit.
class too_many_tasks : public rejected_execution {
 public:
  too_many_tasks(std::size_t work_in_progress, std::size_t limit, const std::string& name)
      : rejected_execution("Work in progress " + std::to_string(work_in_progress) + " exceeds " +
                           std::to_string(limit) + " jobs in " + name) {}
};

// A lock was not granted within its acquire timeout; the waiter is no longer queued.
class lock_timeout : public std::runtime_error {
 public:
  lock_timeout() : std::runtime_error("weft: the lock was not granted within its acquire timeout") {}
  using std::runtime_error::runtime_error;
};

// A lock holder overran its lease; its block has stopped, then the lock moved on.
class lease_expired : public std::runtime_error {
 public:
  lease_expired()
      : std::runtime_error("weft: the lock holder overran its lease; its block was cancelled") {}
  using std::runtime_error::runtime_error;
};

}  // namespace weft
