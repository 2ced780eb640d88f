// lib/core/runtime_test_hooks.hpp — how weft's own tests reach inside a runtime,
// which users cannot: build one whose io_uring rings fail on purpose
// (detail/ring_faults.hpp), and look at its loops. runtime befriends this
// struct; nothing under include/ defines it, so the public runtime_options
// holds user options only.
#pragma once

#include <utility>

#include <weft/detail/ring_faults.hpp>
#include <weft/runtime.hpp>

namespace weft::detail {

struct runtime_test_hooks {
  // A runtime whose rings take their faults from `faults`, which must
  // outlive it. Throws what runtime's constructor throws.
  static runtime with_faults(runtime_options o, ring_faults& faults) { return runtime(std::move(o), &faults); }

  // The runtime's insides (lib/core/runtime_impl.hpp), for a test that watches
  // its loops.
  static runtime_impl& impl(runtime& rt) noexcept { return *rt.impl_; }
};

}  // namespace weft::detail
