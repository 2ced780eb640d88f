// weft/detail/error_sink.hpp — where exceptions nobody will observe go.
//
// A detached task that threw, or a periodic job's error, is reported to
// runtime_options::on_error, or to stderr without one. The sink is shared by
// the runtime and by every join handle holding a failed outcome, so a handle
// dropped after its runtime is gone still reports safely: the last owner
// frees it (reference count below).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>

namespace weft::detail {

struct error_sink {
  std::atomic<std::uint32_t> refs{1};
  std::function<void(std::exception_ptr)> on_error;

  void report(std::exception_ptr e) noexcept;  // lib/core/runtime.cpp
  void add_ref() noexcept {
    // relaxed: taken by a party that already reaches the sink through a live runtime.
    refs.fetch_add(1, std::memory_order_relaxed);
  }
  void drop_ref() noexcept {
    // acq_rel: the last owner deletes, after everyone else's use.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

}  // namespace weft::detail
