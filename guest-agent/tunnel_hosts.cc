#include "guest-agent/tunnel_hosts.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>

#include <fmt/format.h>

namespace berth::agent {
namespace {

namespace ip = boost::asio::ip;

// ::ffff:a.b.c.d is a.b.c.d.
ip::address Normalize(const ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return ip::make_address_v4(ip::v4_mapped, address.to_v6());
  }
  return address;
}

bool SameAddress(const ip::address& a, const ip::address& b) {
  if (a.is_v4() != b.is_v4()) return false;
  if (a.is_v4()) return a.to_v4() == b.to_v4();
  // Link-local addresses are equal on any interface for this purpose: the scope only picks
  // the interface to connect through, and all of them are the guest's own.
  return a.to_v6().to_bytes() == b.to_v6().to_bytes();
}

}  // namespace

std::vector<ip::address> InterfaceAddresses() {
  std::vector<ip::address> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    if (it->ifa_addr->sa_family == AF_INET) {
      sockaddr_in sin{};
      std::memcpy(&sin, it->ifa_addr, sizeof(sin));
      ip::address_v4::bytes_type bytes;
      std::memcpy(bytes.data(), &sin.sin_addr, bytes.size());
      out.push_back(ip::address_v4(bytes));
    } else if (it->ifa_addr->sa_family == AF_INET6) {
      sockaddr_in6 sin6{};
      std::memcpy(&sin6, it->ifa_addr, sizeof(sin6));
      ip::address_v6::bytes_type bytes;
      std::memcpy(bytes.data(), &sin6.sin6_addr, bytes.size());
      out.push_back(ip::address_v6(bytes, sin6.sin6_scope_id));
    }
  }
  freeifaddrs(list);
  return out;
}

Result<ip::address> TunnelAddress(std::string_view host, const std::vector<ip::address>& own) {
  std::string text(host);
  if (text.empty() || text == "localhost") text = "127.0.0.1";
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  boost::system::error_code ec;
  ip::address address = ip::make_address(text, ec);
  if (ec) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("host '{}' is not a numeric IP address of this workspace", host));
  }
  address = Normalize(address);
  if (address.is_loopback()) return address;
  if (!address.is_unspecified() && !address.is_multicast()) {
    for (const auto& mine : own) {
      if (SameAddress(address, Normalize(mine))) return address;
    }
  }
  return Fail(ErrorCode::kPermissionDenied,
              fmt::format("host '{}' is not an address of this workspace; tunnels reach only "
                          "the workspace's own ports",
                          host));
}

}  // namespace berth::agent
