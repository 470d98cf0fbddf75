#include "controller/network/network_api.h"

#include <chrono>

#include "common/protocol/ports.h"

namespace berth::network {
namespace {

std::string Iso(int64_t unix_seconds) {
  return protocol::Iso8601(std::chrono::system_clock::time_point(std::chrono::seconds(unix_seconds)));
}

}  // namespace

nlohmann::json NetworkStatusJson(const NetworkStatus& s) {
  nlohmann::json refused = nlohmann::json::array();
  for (const auto& d : s.refused) {
    refused.push_back({{"address", d.address}, {"port", d.port}, {"at", Iso(d.at)}});
  }
  nlohmann::json names = nlohmann::json::array();
  for (const auto& n : s.dns.recent_refused) names.push_back({{"name", n.name}, {"at", Iso(n.at)}});
  auto policy = PolicyJson(s.policy);
  return {{"egress", policy["egress"]},
          {"allow", policy["allow"]},
          {"isolated", s.isolated},
          {"counters",
           {{"refused_packets", s.counters.refused_packets},
            {"refused_bytes", s.counters.refused_bytes},
            {"allowed_packets", s.counters.allowed_packets},
            {"allowed_bytes", s.counters.allowed_bytes},
            {"refused_names", s.dns.refused},
            {"answered_names", s.dns.answered},
            {"failed_names", s.dns.failed}}},
          {"refused", refused},
          {"refused_names", names}};
}

}  // namespace berth::network
