// Wall-clock time as unix seconds, the unit the store and the API's timestamps use.
#pragma once

#include <chrono>
#include <cstdint>

namespace berth {

inline int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace berth
