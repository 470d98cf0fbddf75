// Where a Berth server listens or a client connects: a unix socket, a TCP address or a vsock
// port. All three are carried by Asio's generic stream protocol, so one HTTP/WebSocket code
// path serves every transport.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <boost/asio/generic/stream_protocol.hpp>

#include "common/error.h"

namespace berth {

struct Endpoint {
  enum class Kind { kUnix, kTcp, kVsock };
  Kind kind = Kind::kTcp;
  std::string path;        // kUnix
  std::string host;        // kTcp: a literal IPv4/IPv6 address or "localhost"
  uint16_t port = 0;       // kTcp, kVsock
  uint32_t cid = 0;        // kVsock: for connecting (listeners take VMADDR_CID_ANY)

  // "unix:/run/x.sock", "tcp:127.0.0.1:7000", "tcp:[::1]:7000", "vsock:1024" (listen on any
  // CID) or "vsock:3:1024" (connect to CID 3).
  static Result<Endpoint> Parse(std::string_view text);
  std::string ToString() const;

  // The socket address, for bind() or connect(). TCP hosts must be numeric (or "localhost").
  Result<boost::asio::generic::stream_protocol::endpoint> ToAsio() const;
};

// The endpoint a connected or listening socket is bound to (used to learn port 0's port).
Result<Endpoint> LocalEndpoint(int fd, Endpoint::Kind kind);

}  // namespace berth
