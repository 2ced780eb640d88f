// weft/detail/saturating.hpp — time arithmetic that clamps instead of overflowing.
//
// weft treats duration::max() as "for ever" and accepts any duration a user
// passes (milliseconds::max(), hours::min()), so every deadline is computed
// with saturating_add: a sum past the clock's range is its end, never a
// wrapped-around time in the past.
#pragma once

#include <chrono>

namespace weft::detail {

// t + d, clamped to [time_point::min(), time_point::max()] where the sum
// would overflow, for any clock and any duration unit (a ttl or a wait of
// duration::max() means "for ever", and milliseconds::max() does not fit in
// nanoseconds). The one such helper in weft.
template <class Clock, class Dur, class Rep, class Period>
constexpr std::chrono::time_point<Clock, Dur> saturating_add(std::chrono::time_point<Clock, Dur> t,
                                                             std::chrono::duration<Rep, Period> d) noexcept {
  using tp = std::chrono::time_point<Clock, Dur>;
  using D = std::chrono::duration<Rep, Period>;
  // d in the time point's unit, clamped first: duration_cast of a coarse
  // max() would overflow.
  Dur step;
  if (d >= std::chrono::duration_cast<D>(Dur::max())) step = Dur::max();
  else if (d <= std::chrono::duration_cast<D>(Dur::min())) step = Dur::min();
  else step = std::chrono::duration_cast<Dur>(d);
  // max() - step and min() - step cannot overflow for a step of that sign.
  if (step > Dur::zero() && t > tp::max() - step) return tp::max();
  if (step < Dur::zero() && t < tp::min() - step) return tp::min();
  return t + step;
}

}  // namespace weft::detail
