// One total deadline per exchange (STYLE.md): a point on the steady clock by which a call, with
// all its retries, connections and waits, is over. Helpers saturate instead of overflowing, so
// kNoDeadline can be passed anywhere a deadline is taken.
#pragma once

#include <algorithm>
#include <chrono>

namespace berth {

using Deadline = std::chrono::steady_clock::time_point;

// "No limit": the call ends when the peer ends it (a follow stream, an interactive session).
inline constexpr Deadline kNoDeadline = Deadline::max();

// The deadline `d` from now; kNoDeadline when that is past what the clock can hold.
template <class Rep, class Period>
Deadline DeadlineIn(std::chrono::duration<Rep, Period> d) {
  auto now = std::chrono::steady_clock::now();
  auto step = std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
  if (step <= std::chrono::steady_clock::duration::zero()) return now;
  if (step >= kNoDeadline - now) return kNoDeadline;
  return now + step;
}

// What is left until `deadline`, never negative; hours beyond any real call for kNoDeadline.
inline std::chrono::milliseconds Remaining(Deadline deadline) {
  if (deadline == kNoDeadline) return std::chrono::hours(24 * 365);
  auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(left);
}

inline bool Expired(Deadline deadline) {
  return deadline != kNoDeadline && std::chrono::steady_clock::now() >= deadline;
}

// The smaller of a step's own timeout and what is left of the deadline.
inline std::chrono::milliseconds StepTimeout(std::chrono::milliseconds step, Deadline deadline) {
  return std::min(step, Remaining(deadline));
}

}  // namespace berth
