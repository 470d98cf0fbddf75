#include "common/endpoint.h"

#include <arpa/inet.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <charconv>
#include <cstring>

#include <fmt/format.h>

namespace berth {
namespace {

template <class T>
bool ParseNumber(std::string_view text, T& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

}  // namespace

Result<Endpoint> Endpoint::Parse(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("bad endpoint '{}': {} (want unix:PATH, tcp:HOST:PORT or "
                            "vsock:[CID:]PORT)",
                            text, why));
  };
  Endpoint ep;
  if (text.starts_with("unix:")) {
    ep.kind = Kind::kUnix;
    ep.path = std::string(text.substr(5));
    if (ep.path.empty()) return bad("empty path");
    if (ep.path.size() >= sizeof(sockaddr_un::sun_path)) return bad("path too long");
    return ep;
  }
  if (text.starts_with("tcp:")) {
    ep.kind = Kind::kTcp;
    std::string_view rest = text.substr(4);
    auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad("missing port");
    std::string_view host = rest.substr(0, colon);
    if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
    if (host.empty()) return bad("missing host");
    ep.host = std::string(host);
    if (!ParseNumber(rest.substr(colon + 1), ep.port)) return bad("bad port");
    return ep;
  }
  if (text.starts_with("vsock:")) {
    ep.kind = Kind::kVsock;
    std::string_view rest = text.substr(6);
    auto colon = rest.find(':');
    if (colon == std::string_view::npos) {
      ep.cid = VMADDR_CID_ANY;
      if (!ParseNumber(rest, ep.port)) return bad("bad port");
    } else {
      if (!ParseNumber(rest.substr(0, colon), ep.cid)) return bad("bad cid");
      if (!ParseNumber(rest.substr(colon + 1), ep.port)) return bad("bad port");
    }
    return ep;
  }
  return bad("unknown scheme");
}

std::string Endpoint::ToString() const {
  switch (kind) {
    case Kind::kUnix: return "unix:" + path;
    case Kind::kTcp:
      return host.find(':') != std::string::npos ? fmt::format("tcp:[{}]:{}", host, port)
                                                 : fmt::format("tcp:{}:{}", host, port);
    case Kind::kVsock:
      return cid == VMADDR_CID_ANY ? fmt::format("vsock:{}", port)
                                   : fmt::format("vsock:{}:{}", cid, port);
  }
  return "?";
}

Result<boost::asio::generic::stream_protocol::endpoint> Endpoint::ToAsio() const {
  using Generic = boost::asio::generic::stream_protocol::endpoint;
  switch (kind) {
    case Kind::kUnix: {
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::memcpy(addr.sun_path, path.data(), path.size());
      return Generic(&addr, sizeof(addr), 0);
    }
    case Kind::kTcp: {
      std::string h = host == "localhost" ? "127.0.0.1" : host;
      sockaddr_in v4{};
      if (inet_pton(AF_INET, h.c_str(), &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(port);
        return Generic(&v4, sizeof(v4), IPPROTO_TCP);
      }
      sockaddr_in6 v6{};
      if (inet_pton(AF_INET6, h.c_str(), &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(port);
        return Generic(&v6, sizeof(v6), IPPROTO_TCP);
      }
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("tcp host '{}' is not a numeric address", host));
    }
    case Kind::kVsock: {
      sockaddr_vm addr{};
      addr.svm_family = AF_VSOCK;
      addr.svm_cid = cid;
      addr.svm_port = port;
      return Generic(&addr, sizeof(addr), 0);
    }
  }
  return Fail(ErrorCode::kInternal, "unknown endpoint kind");
}

Result<Endpoint> LocalEndpoint(int fd, Endpoint::Kind kind) {
  sockaddr_storage storage{};
  socklen_t len = sizeof(storage);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &len) != 0) {
    return Fail(ErrnoError(errno, "getsockname"));
  }
  Endpoint ep;
  ep.kind = kind;
  if (storage.ss_family == AF_UNIX) {
    const auto* addr = reinterpret_cast<const sockaddr_un*>(&storage);
    ep.path = addr->sun_path;
  } else if (storage.ss_family == AF_INET) {
    const auto* addr = reinterpret_cast<const sockaddr_in*>(&storage);
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &addr->sin_addr, buf, sizeof(buf));
    ep.host = buf;
    ep.port = ntohs(addr->sin_port);
  } else if (storage.ss_family == AF_INET6) {
    const auto* addr = reinterpret_cast<const sockaddr_in6*>(&storage);
    char buf[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &addr->sin6_addr, buf, sizeof(buf));
    ep.host = buf;
    ep.port = ntohs(addr->sin6_port);
  } else if (storage.ss_family == AF_VSOCK) {
    const auto* addr = reinterpret_cast<const sockaddr_vm*>(&storage);
    ep.cid = addr->svm_cid;
    ep.port = static_cast<uint16_t>(addr->svm_port);
  }
  return ep;
}

}  // namespace berth
