#include "controller/network/uid_range.h"

#include <algorithm>

#include <fmt/format.h>

namespace berth::network {

Result<uid_t> PickFreeUid(const UidRange& range, const std::vector<int64_t>& used) {
  std::vector<int64_t> taken;
  for (int64_t u : used) {
    if (range.Contains(u)) taken.push_back(u);
  }
  std::sort(taken.begin(), taken.end());
  int64_t candidate = range.first;
  for (int64_t u : taken) {
    if (u > candidate) break;
    if (u == candidate) ++candidate;
  }
  if (!range.Contains(candidate)) {
    return Fail(ErrorCode::kResourceExhausted,
                fmt::format("all {} workspace uids ({}–{}) are taken", range.count, range.first, range.last()));
  }
  return static_cast<uid_t>(candidate);
}

std::string ResolverAddress(const UidRange& range, uid_t uid) {
  uint32_t offset = static_cast<uint32_t>(uid - range.first) & 0xFFFF;
  return fmt::format("127.77.{}.{}", offset >> 8, offset & 0xFF);
}

}  // namespace berth::network
