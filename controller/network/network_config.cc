#include "controller/network/network_config.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

namespace berth::network {
namespace {

Error Invalid(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

}  // namespace

Result<NetworkConfig> ParseNetworkConfig(const nlohmann::json& j) {
  if (!j.is_object()) return Fail(Invalid("'network' must be an object"));
  NetworkConfig c;
  for (const auto& [k, v] : j.items()) {
    if (k == "isolation") {
      if (!v.is_boolean()) return Fail(Invalid("'network.isolation' must be true or false"));
      c.isolation = v.get<bool>();
    } else if (k == "open_cidrs") {
      if (!v.is_array() || v.size() > kMaxAllowEntries) {
        return Fail(Invalid(fmt::format("'network.open_cidrs' must be an array of at most {} CIDRs",
                                        kMaxAllowEntries)));
      }
      for (const auto& e : v) {
        if (!e.is_string()) return Fail(Invalid("'network.open_cidrs' entries must be strings"));
        auto cidr = ParseCidr(e.get<std::string>());
        if (!cidr) return Fail(cidr.error());
        for (const char* closed : {"127.0.0.0/8", "0.0.0.0/8", "::1/128", "::/128", "::ffff:0:0/96"}) {
          if (cidr->Overlaps(*ParseCidr(closed))) {
            return Fail(Invalid(fmt::format("'network.open_cidrs': {} overlaps {}, which stays closed",
                                            cidr->ToString(), closed)));
          }
        }
        if (cidr->prefix == 0) return Fail(Invalid("'network.open_cidrs' cannot open everything (/0)"));
        c.open_cidrs.push_back(*cidr);
      }
    } else if (k == "uid_range") {
      if (!v.is_object() || !v.contains("first") || !v.contains("count") || v.size() != 2 ||
          !v["first"].is_number_unsigned() || !v["count"].is_number_unsigned()) {
        return Fail(Invalid("'network.uid_range' must be {\"first\": UID, \"count\": N}"));
      }
      auto first = v["first"].get<uint64_t>();
      auto count = v["count"].get<uint64_t>();
      // Below 100000 are the system's and its users' uids; the resolver addresses give at most
      // 65536 workspaces; uid_t is 32 bits and (uid_t)-1 means "no change" to setresuid.
      if (first < 100000 || count < 1 || count > 65536 || first + count >= 0xFFFFFFFFull) {
        return Fail(Invalid("'network.uid_range' must start at 100000 or above and hold 1 to 65536 uids"));
      }
      c.uid_first = static_cast<uid_t>(first);
      c.uid_count = static_cast<uint32_t>(count);
    } else if (k == "upstream_dns") {
      if (!v.is_array() || v.size() > 8) return Fail(Invalid("'network.upstream_dns' must be an array of at most 8 addresses"));
      for (const auto& e : v) {
        if (!e.is_string()) return Fail(Invalid("'network.upstream_dns' entries must be strings"));
        auto addr = ParseCidr(e.get<std::string>());
        if (!addr || addr->prefix != (addr->v6 ? 128 : 32) || e.get<std::string>().find('/') != std::string::npos) {
          return Fail(Invalid(fmt::format("'network.upstream_dns': '{}' is not an IP address",
                                          e.get<std::string>())));
        }
        c.upstream_dns.push_back(e.get<std::string>());
      }
    } else if (k == "libvirt_qemu_dir") {
      if (!v.is_string()) return Fail(Invalid("'network.libvirt_qemu_dir' must be a string"));
      c.libvirt_qemu_dir = v.get<std::string>();
    } else if (k == "debug_forwards") {
      if (!v.is_array() || v.size() > kMaxDebugForwards) {
        return Fail(Invalid(fmt::format("'network.debug_forwards' must be an array of at most {} "
                                        "{{\"guest\": PORT}} objects", kMaxDebugForwards)));
      }
      for (const auto& e : v) {
        if (!e.is_object() || e.size() != 1 || !e.contains("guest") || !e["guest"].is_number_unsigned() ||
            e["guest"].get<uint64_t>() < 1 || e["guest"].get<uint64_t>() > 65535) {
          return Fail(Invalid("'network.debug_forwards' entries must be {\"guest\": PORT}, PORT 1-65535"));
        }
        auto port = static_cast<uint16_t>(e["guest"].get<uint64_t>());
        // The agent's port in every image (transport.cc): berthd reaches it already, and a second,
        // unauthenticated way in would only confuse.
        if (port == 1024) return Fail(Invalid("'network.debug_forwards': guest port 1024 is the agent's"));
        if (std::find(c.debug_forwards.begin(), c.debug_forwards.end(), port) != c.debug_forwards.end()) {
          return Fail(Invalid(fmt::format("'network.debug_forwards': guest port {} twice", port)));
        }
        c.debug_forwards.push_back(port);
      }
    } else if (k == "passt_binary") {
      if (!v.is_string()) return Fail(Invalid("'network.passt_binary' must be a string"));
      c.passt_binary = v.get<std::string>();
    } else {
      return Fail(Invalid(fmt::format("unknown key 'network.{}' (isolation, open_cidrs, uid_range, "
                                      "upstream_dns, passt_binary, libvirt_qemu_dir, debug_forwards)", k)));
    }
  }
  return c;
}

std::vector<std::string> NameserversFromResolvConf(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, addr;
    if (!(words >> key >> addr) || key != "nameserver") continue;
    if (auto pct = addr.find('%'); pct != std::string::npos) continue;  // scoped link-local
    if (auto c = ParseCidr(addr); c && c->prefix == (c->v6 ? 128 : 32)) out.push_back(addr);
  }
  return out;
}

}  // namespace berth::network
