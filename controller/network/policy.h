// A workspace's egress policy (DESIGN.md, "Guest network"; docs/api.md, "Network"):
//   {"egress": "open" | "none" | "allowlist", "allow": ["github.com", "*.pypi.org", "203.0.113.0/24"]}
// `open` (the default) is the internet, never the host or the closed ranges; `none` lets nothing
// leave the guest (berthd still reaches its agent); `allowlist` only the listed names (exact,
// or "*." for the subdomains of a name, not the name itself) and CIDRs. Parsing is strict and
// bounded: the body comes from any key with write scope. Pure; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::network {

enum class Egress { kOpen, kNone, kAllowlist };
std::string_view EgressName(Egress egress);

// Each entry of `allow` is short and there are few: the list is rendered into one nftables
// batch and checked against every DNS question.
inline constexpr size_t kMaxAllowEntries = 256;
inline constexpr size_t kMaxNameBytes = 253;  // the longest DNS name in text form

// An IPv4 or IPv6 prefix, normalized (host bits cleared) so "10.1.2.3/8" is "10.0.0.0/8".
struct Cidr {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // v4 uses the first 4
  int prefix = 0;

  std::string ToString() const;
  bool Contains(const Cidr& other) const;  // `other` lies wholly inside this prefix
  bool Overlaps(const Cidr& other) const;
  friend bool operator==(const Cidr&, const Cidr&) = default;
};
// "203.0.113.0/24", "2001:db8::/32", or a bare address (a /32 or /128).
Result<Cidr> ParseCidr(std::string_view text);

struct Policy {
  Egress egress = Egress::kOpen;
  std::vector<std::string> names;  // lowercase, no trailing dot; "*.x.y" for subdomains only
  std::vector<Cidr> cidrs;
  friend bool operator==(const Policy&, const Policy&) = default;
};

// The JSON body above. Unknown fields, a non-empty `allow` under open/none, malformed names or
// CIDRs and more than kMaxAllowEntries entries are invalid_argument errors that say which.
Result<Policy> ParsePolicy(const nlohmann::json& body);
nlohmann::json PolicyJson(const Policy& policy);

// Whether a DNS question for `name` (any case, trailing dot allowed) is answered: everything
// under open, nothing under none, the listed names under allowlist.
bool NameAllowed(const Policy& policy, std::string_view name);

}  // namespace berth::network
