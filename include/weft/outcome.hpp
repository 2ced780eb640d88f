// weft/outcome.hpp — outcome<T>: how a task ended, held without throwing.
//
// A finished task has exactly one of three endings: a value, an exception it
// threw, or "stopped" (it was cancelled, or threw weft::cancelled itself; see
// cancel.hpp). outcome<T> holds that ending, like folly's Try or Tokio's
// Result<T, JoinError>: `co_await handle.outcome()` yields one and never
// throws for the task's sake, which is also the cheap way to join a task
// that may have been cancelled. An outcome that was moved from is empty.
//
// Layout: the value and the exception share one union and a state byte says
// which is live, so an outcome<int> is 16 bytes. weft keeps a finished,
// unjoined task as just this (see join_handle.hpp).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <weft/errors.hpp>

namespace weft {

namespace detail {
struct outcome_access;
}

template <class T>
class outcome {
  // What the union holds for T: T itself, a pointer for T&, nothing for void.
  struct none {};
  using stored = std::conditional_t<std::is_void_v<T>, none,
                                    std::conditional_t<std::is_reference_v<T>, std::remove_reference_t<T>*, T>>;
  enum class state : std::uint8_t { empty, value, error, stopped };

 public:
  using value_type = T;

  outcome() noexcept {}
  outcome(outcome&& o) noexcept(std::is_nothrow_move_constructible_v<stored>) { take_from(o); }
  outcome(const outcome& o)
    requires std::is_copy_constructible_v<stored>
  {
    copy_from(o);
  }
  outcome& operator=(outcome&& o) noexcept(std::is_nothrow_move_constructible_v<stored>) {
    if (this != &o) {
      reset();
      take_from(o);
    }
    return *this;
  }
  outcome& operator=(const outcome& o)
    requires std::is_copy_constructible_v<stored>
  {
    if (this != &o) {
      reset();
      copy_from(o);
    }
    return *this;
  }
  ~outcome() { reset(); }

  bool has_value() const noexcept { return state_ == state::value; }
  // The task was cancelled and stopped (or threw weft::cancelled).
  bool stopped() const noexcept { return state_ == state::stopped; }
  // What the task threw; null unless it threw.
  std::exception_ptr error() const noexcept { return state_ == state::error ? u_.error : nullptr; }

  // The value; rethrows the task's exception, throws weft::cancelled when it
  // stopped, std::logic_error when this outcome is empty (moved from).
  std::add_lvalue_reference_t<T> value() & { return get(); }
  std::add_lvalue_reference_t<const T> value() const&
    requires(!std::is_void_v<T>)
  {
    return const_cast<outcome*>(this)->get();
  }
  std::add_rvalue_reference_t<T> value() && {
    if constexpr (std::is_void_v<T>) get();
    else return static_cast<std::add_rvalue_reference_t<T>>(get());
  }

 private:
  friend struct detail::outcome_access;

  std::add_lvalue_reference_t<T> get() {
    switch (state_) {
      case state::value:
        if constexpr (std::is_void_v<T>) return;
        else if constexpr (std::is_reference_v<T>) return *u_.value;
        else return u_.value;
      case state::error:
        std::rethrow_exception(u_.error);
      case state::stopped:
        throw cancelled();
      case state::empty:
        break;
    }
    throw std::logic_error("weft: outcome::value() on an empty outcome (moved from, or taken already)");
  }

  template <class... A>
  void set_value(A&&... a) {
    ::new (static_cast<void*>(std::addressof(u_.value))) stored(std::forward<A>(a)...);
    state_ = state::value;
  }
  void set_error(std::exception_ptr e) noexcept {
    ::new (static_cast<void*>(std::addressof(u_.error))) std::exception_ptr(std::move(e));
    state_ = state::error;
  }
  void set_stopped() noexcept { state_ = state::stopped; }

  void reset() noexcept {
    if (state_ == state::value) u_.value.~stored();
    else if (state_ == state::error) u_.error.~exception_ptr();
    state_ = state::empty;
  }
  void take_from(outcome& o) noexcept(std::is_nothrow_move_constructible_v<stored>) {
    if (o.state_ == state::value) set_value(std::move(o.u_.value));
    else if (o.state_ == state::error) set_error(std::move(o.u_.error));
    else state_ = o.state_;
    o.reset();
  }
  void copy_from(const outcome& o) {
    if (o.state_ == state::value) set_value(o.u_.value);
    else if (o.state_ == state::error) set_error(o.u_.error);
    else state_ = o.state_;
  }

  union storage {
    stored value;
    std::exception_ptr error;
    storage() noexcept {}
    ~storage() {}
  } u_;
  state state_ = state::empty;
};

namespace detail {

// weft's own writers of an outcome: a finishing task, a pool job.
struct outcome_access {
  template <class T, class... A>
  static void set_value(outcome<T>& o, A&&... a) {
    o.set_value(std::forward<A>(a)...);
  }
  template <class T>
  static void set_error(outcome<T>& o, std::exception_ptr e) noexcept {
    o.reset();
    o.set_error(std::move(e));
  }
  template <class T>
  static void set_stopped(outcome<T>& o) noexcept {
    o.reset();
    o.set_stopped();
  }
  template <class T>
  static bool is_error(const outcome<T>& o) noexcept {
    return o.state_ == outcome<T>::state::error;
  }
  // The value moved out (T by value, so nothing refers into `o` afterwards),
  // or the ending rethrown (join, block_on).
  template <class T>
  static T take(outcome<T>& o) {
    if constexpr (std::is_void_v<T> || std::is_reference_v<T>) return o.get();
    else return std::move(o.get());
  }
};

}  // namespace detail

}  // namespace weft
