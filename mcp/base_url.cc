#include "mcp/base_url.h"

#include <charconv>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>

namespace berth::mcp {
namespace {

bool IsNumericHost(std::string_view host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(std::string(host), ec);
  return !ec;
}

}  // namespace

Result<Endpoint> ParseBaseUrl(std::string_view url) {
  if (url.starts_with("unix:") || url.starts_with("tcp:")) return Endpoint::Parse(url);
  if (url.starts_with("https://")) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("{}: https is not supported; use http:// (TLS belongs in a proxy in "
                            "front of berthd)",
                            url));
  }
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("{}: expected http://HOST:PORT, tcp:HOST:PORT or unix:PATH", url));
  }
  std::string_view rest = url.substr(kScheme.size());
  std::string_view authority = rest.substr(0, rest.find('/'));
  std::string_view path = rest.substr(authority.size());
  if (!path.empty() && path != "/") {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("{}: berthd's URL takes no path (its API is at /v1)", url));
  }
  std::string_view host = authority;
  std::string_view port_text;
  if (authority.starts_with('[')) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: unclosed '['", url));
    }
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: bad host", url));
      port_text = after.substr(1);
    }
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
  }
  if (host.empty()) return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: no host", url));
  uint16_t port = 80;
  if (!port_text.empty()) {
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: bad port", url));
    }
  }
  Endpoint endpoint;
  endpoint.kind = Endpoint::Kind::kTcp;
  endpoint.port = port;
  if (host == "localhost" || IsNumericHost(host)) {
    endpoint.host = std::string(host);
    return endpoint;
  }
  // The client dials numeric addresses only: resolve the name once.
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  auto results = resolver.resolve(std::string(host), std::to_string(port), ec);
  if (ec || results.empty()) {
    return Fail(ErrorCode::kUnavailable,
                fmt::format("{}: cannot resolve {}: {}", url, host, ec ? ec.message() : "no address"));
  }
  endpoint.host = results.begin()->endpoint().address().to_string();
  return endpoint;
}

}  // namespace berth::mcp
