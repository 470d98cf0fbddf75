// Type names shared by Berth's HTTP/WebSocket servers and clients.
#pragma once

#include <chrono>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace berth::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;

using Stream = beast::basic_stream<asio::generic::stream_protocol, asio::any_io_executor,
                                   beast::unlimited_rate_policy>;
using WebSocket = websocket::stream<Stream>;
template <class T>
using Task = asio::awaitable<T>;

// Kubernetes-style exec channel prefixes on binary WebSocket frames.
inline constexpr unsigned char kChannelStdin = 0;
inline constexpr unsigned char kChannelStdout = 1;
inline constexpr unsigned char kChannelStderr = 2;

}  // namespace berth::http
