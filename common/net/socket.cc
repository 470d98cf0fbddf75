#include "common/net/socket.h"

#include <sys/socket.h>

namespace berth::net {

namespace asio = boost::asio;

Result<Socket> AdoptSocket(const asio::any_io_executor& executor, UniqueFd fd) {
  int family = 0;
  int proto = 0;
  socklen_t len = sizeof(family);
  if (getsockopt(fd.get(), SOL_SOCKET, SO_DOMAIN, &family, &len) != 0) {
    return Fail(ErrnoError(errno, "getsockopt SO_DOMAIN"));
  }
  len = sizeof(proto);
  if (getsockopt(fd.get(), SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0) {
    return Fail(ErrnoError(errno, "getsockopt SO_PROTOCOL"));
  }
  Socket socket(executor);
  boost::system::error_code ec;
  socket.assign(asio::generic::stream_protocol(family, proto), fd.get(), ec);
  if (ec) return Fail(ErrorCode::kInternal, "adopt socket: " + ec.message());
  (void)fd.release();  // owned by `socket` now
  return socket;
}

Result<Socket> ToGeneric(asio::ip::tcp::socket&& socket) {
  auto executor = socket.get_executor();
  boost::system::error_code ec;
  int fd = socket.release(ec);
  if (ec) return Fail(ErrorCode::kInternal, "release socket: " + ec.message());
  return AdoptSocket(executor, UniqueFd(fd));
}

void HalfClose(Socket& socket) {
  boost::system::error_code ignored;
  socket.shutdown(asio::socket_base::shutdown_send, ignored);
}

void ShutdownBoth(Socket& a, Socket& b) {
  boost::system::error_code ignored;
  a.shutdown(asio::socket_base::shutdown_both, ignored);
  b.shutdown(asio::socket_base::shutdown_both, ignored);
}

}  // namespace berth::net
