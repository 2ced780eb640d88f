// weft/detail/hardware_threads.hpp — how many hardware threads weft counts,
// for defaults sized by the machine (elastic_options::max_threads).
//
// std::thread::hardware_concurrency() may say 0 ("unknown"); weft counts
// that as 1, so no default ever comes out as zero threads.
#pragma once

#include <thread>

namespace weft::detail {

// `reported` is a hardware_concurrency() answer (a parameter so tests can
// give 0).
constexpr unsigned cores_or_one(unsigned reported) noexcept { return reported == 0 ? 1 : reported; }
inline unsigned cores() noexcept { return cores_or_one(std::thread::hardware_concurrency()); }

}  // namespace weft::detail
