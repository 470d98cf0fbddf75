// Polls a condition until it holds or a deadline passes: the tests' only way to wait (no
// sleeps as synchronisation).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace berth::testing {

inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

}  // namespace berth::testing
