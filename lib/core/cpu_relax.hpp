// lib/core/cpu_relax.hpp — the pause hint of a spin-wait, on every architecture weft builds for.
//
// Tells the core a spin loop is waiting on another thread: on x86 `pause`
// (saves power and leaves the sibling hyper-thread the pipeline), on Arm
// `yield`; elsewhere nothing, which is still correct.
#pragma once

namespace weft::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace weft::detail
