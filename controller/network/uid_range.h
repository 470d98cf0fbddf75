// The reserved uid range: each workspace owns one uid of it for as long as it exists (its
// passt and its QEMU run as that uid, and nftables matches it), and each uid maps onto one
// loopback address where that workspace's filtering resolver listens. Pure; any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"

namespace berth::network {

struct UidRange {
  uid_t first = 2'000'000;
  uint32_t count = 65536;
  bool Contains(int64_t uid) const { return uid >= first && uid < static_cast<int64_t>(first) + count; }
  uid_t last() const { return static_cast<uid_t>(first + count - 1); }
};

// The lowest uid of `range` that is not in `used`; resource_exhausted when all are taken.
Result<uid_t> PickFreeUid(const UidRange& range, const std::vector<int64_t>& used);

// 127.77.H.L for the uid's offset H*256+L in the range: on Linux every 127/8 address is the
// host's own without configuration, and a distinct address per workspace lets nftables allow
// each uid its own resolver and nothing else on loopback.
std::string ResolverAddress(const UidRange& range, uid_t uid);

}  // namespace berth::network
