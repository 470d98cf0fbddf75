#include "tests/integration/desktop_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <boost/beast/core/flat_buffer.hpp>

#include "common/child_fds.h"
#include "tests/support/wait.h"

namespace berth::testing {

namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using boost::asio::ip::tcp;

namespace {

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}
std::string U16(int v) { return Bytes({(v >> 8) & 0xff, v & 0xff}); }
uint32_t ReadU32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) | static_cast<uint8_t>(s[at + 3]);
}
int ReadU16(const std::string& s, size_t at) {
  return (static_cast<uint8_t>(s[at]) << 8) | static_cast<uint8_t>(s[at + 1]);
}

bool WriteAll(int fd, const std::string& data) {
  size_t at = 0;
  while (at < data.size()) {
    ssize_t n = ::send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, size_t n, std::string& out) {
  out.clear();
  char buf[256];
  while (out.size() < n) {
    ssize_t got = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (got <= 0) return false;
    out.append(buf, static_cast<size_t>(got));
  }
  return true;
}

sockaddr_un UnixAddress(const std::filesystem::path& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return addr;
}

}  // namespace

std::string PointerEvent(int mask, int x, int y) { return Bytes({5, mask}) + U16(x) + U16(y); }
std::string KeyEvent(bool down, uint32_t keysym) {
  return Bytes({4, down ? 1 : 0, 0, 0, static_cast<int>(keysym >> 24), static_cast<int>((keysym >> 16) & 0xff),
                static_cast<int>((keysym >> 8) & 0xff), static_cast<int>(keysym & 0xff)});
}
std::string UpdateRequest(bool incremental, int w, int h) {
  return Bytes({3, incremental ? 1 : 0}) + U16(0) + U16(0) + U16(w) + U16(h);
}

// --- QEMU ------------------------------------------------------------------------------------

QemuVnc::QemuVnc() {
  std::string log = (dir_.path() / "qemu.log").string();
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  // No guest at all: the CPU never starts (-S); the VGA device gives VNC a screen.
  std::vector<std::string> argv = {"qemu-system-x86_64", "-machine", "pc", "-accel", "tcg", "-m", "64",
                                   "-nodefaults", "-vga", "std", "-S",
                                   "-display", "vnc=unix:" + socket().string()};
  auto spawned = SpawnClean(argv, log_fd, log_fd);
  if (log_fd >= 0) ::close(log_fd);
  if (!spawned) throw std::runtime_error("qemu-system-x86_64 (installed by scripts/setup): " + spawned.error().message);
  pid_ = *spawned;
  bool up = WaitFor([&] { return std::filesystem::exists(socket()); }, std::chrono::seconds(30));
  if (!up) throw std::runtime_error("QEMU's VNC socket did not appear; see " + log);
}

QemuVnc::~QemuVnc() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  bool gone = WaitFor([&] { return ::waitpid(pid_, nullptr, WNOHANG) == pid_; }, std::chrono::seconds(10));
  if (!gone) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

// --- the recording fake ----------------------------------------------------------------------

RecordingRfbServer::RecordingRfbServer(bool drop_unread_at_hangup) : drop_unread_at_hangup_(drop_unread_at_hangup) {
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto addr = UnixAddress(socket());
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0) {
    throw std::runtime_error("fake RFB server: cannot listen");
  }
  accept_thread_ = std::thread([this] {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0 || stop_) {
        if (fd >= 0) ::close(fd);
        return;
      }
      std::lock_guard lock(mutex_);
      auto c = std::make_shared<Conn>();
      c->fd = fd;
      conns_.push_back(c);
      size_t index = conns_.size() - 1;
      threads_.emplace_back([this, index] { Serve(index); });
    }
  });
}

RecordingRfbServer::~RecordingRfbServer() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  accept_thread_.join();
  ::close(listen_fd_);
  {
    std::lock_guard lock(mutex_);
    for (auto& c : conns_) ::shutdown(c->fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
  for (auto& c : conns_) ::close(c->fd);
}

void RecordingRfbServer::Serve(size_t index) {
  std::shared_ptr<Conn> c;
  {
    std::lock_guard lock(mutex_);
    c = conns_[index];
  }
  std::string in;
  if (!WriteAll(c->fd, "RFB 003.008\n") || !ReadAll(c->fd, 12, in)) return;
  if (!WriteAll(c->fd, Bytes({1, 1})) || !ReadAll(c->fd, 1, in) || in[0] != 1) return;
  if (!WriteAll(c->fd, Bytes({0, 0, 0, 0})) || !ReadAll(c->fd, 1, in)) return;
  {
    std::lock_guard lock(mutex_);
    c->client_init = static_cast<uint8_t>(in[0]);
  }
  // 16x16, 32 bpp true colour, name "fake".
  std::string init = U16(16) + U16(16) + Bytes({32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}) +
                     Bytes({0, 0, 0, 4}) + "fake";
  if (!WriteAll(c->fd, init)) return;
  // With drop_unread_at_hangup_, as QEMU's VNC server does: a client that hung up is dropped
  // before what it sent last is read (QEMU checks for the hang-up first), so input sent just
  // before a close is lost unless the client waited for the server to read it. The pause before
  // each read makes that certain here, not a race. FramebufferUpdateRequests are answered
  // (black, raw, 32 bpp) either way.
  char buf[4096];
  size_t parsed = 0;  // how far c->received has been read as client messages
  for (;;) {
    pollfd p{c->fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0) return;
    if (drop_unread_at_hangup_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (::poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLERR)) != 0) return;
    }
    ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    std::string answer;
    {
      std::lock_guard lock(mutex_);
      c->received.append(buf, static_cast<size_t>(n));
      for (;;) {
        std::string_view rest = std::string_view(c->received).substr(parsed);
        if (rest.empty()) break;
        auto u16 = [&](size_t at) { return static_cast<size_t>(static_cast<uint8_t>(rest[at]) << 8 | static_cast<uint8_t>(rest[at + 1])); };
        size_t need = 0;
        switch (static_cast<uint8_t>(rest[0])) {
          case 0: need = 20; break;                                    // SetPixelFormat
          case 2: need = rest.size() >= 4 ? 4 + 4 * u16(2) : 4; break;  // SetEncodings
          case 3: need = 10; break;                                    // FramebufferUpdateRequest
          case 4: need = 8; break;                                     // KeyEvent
          case 5: need = 6; break;                                     // PointerEvent
          default: need = rest.size(); break;                          // anything else: the rest
        }
        if (rest.size() < need) break;
        if (static_cast<uint8_t>(rest[0]) == 3) {
          size_t w = u16(6), h = u16(8);
          answer += Bytes({0, 0, 0, 1}) + std::string(rest.substr(2, 8)) + Bytes({0, 0, 0, 0}) +
                    std::string(w * h * 4, '\0');
        }
        parsed += need;
      }
    }
    if (!answer.empty() && !WriteAll(c->fd, answer)) return;
  }
}

size_t RecordingRfbServer::connections() {
  std::lock_guard lock(mutex_);
  return conns_.size();
}
int RecordingRfbServer::client_init(size_t connection) {
  std::lock_guard lock(mutex_);
  return connection < conns_.size() ? conns_[connection]->client_init : -1;
}
std::string RecordingRfbServer::received(size_t connection) {
  std::lock_guard lock(mutex_);
  return connection < conns_.size() ? conns_[connection]->received : std::string();
}

// --- the viewer ------------------------------------------------------------------------------

bool RfbViewer::Open(uint16_t port, const std::string& target, const std::string& origin, const std::string& key) {
  boost::system::error_code ec;
  ws_.next_layer().connect(tcp::endpoint(boost::asio::ip::address_v4::loopback(), port), ec);
  if (ec) return false;
  // No read may hang a test: 30 s and the read fails.
  timeval tv{30, 0};
  ::setsockopt(ws_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ws_.set_option(websocket::stream_base::decorator([origin, key](websocket::request_type& req) {
    if (!origin.empty()) req.set(beast::http::field::origin, origin);
    if (!key.empty()) req.set(beast::http::field::authorization, "Bearer " + key);
    req.set(beast::http::field::sec_websocket_protocol, "binary");
  }));
  ws_.binary(true);
  websocket::response_type res;
  ws_.handshake(res, "127.0.0.1:" + std::to_string(port), target, ec);
  status_ = res.result_int();
  subprotocol_ = std::string(res[beast::http::field::sec_websocket_protocol]);
  return !ec;
}

void RfbViewer::Send(const std::string& bytes) {
  boost::system::error_code ec;
  ws_.write(boost::asio::buffer(bytes), ec);
}

std::string RfbViewer::Take(size_t n) {
  while (buffered_.size() < n) {
    beast::flat_buffer buf;
    boost::system::error_code ec;
    ws_.read(buf, ec);
    if (ec) return {};
    auto data = buf.cdata();
    buffered_.append(static_cast<const char*>(data.data()), data.size());
  }
  std::string out = buffered_.substr(0, n);
  buffered_.erase(0, n);
  return out;
}

int RfbViewer::Handshake(int shared) {
  if (Take(12) != "RFB 003.008\n") return -1;
  Send("RFB 003.008\n");
  std::string count = Take(1);
  if (count.empty() || Take(static_cast<uint8_t>(count[0])).find('\x01') == std::string::npos) return -1;
  Send(Bytes({1}));
  if (Take(4) != Bytes({0, 0, 0, 0})) return -1;
  Send(Bytes({shared}));
  std::string init = Take(24);
  if (init.size() != 24) return -1;
  Take(ReadU32(init, 20));  // the desktop's name
  Send(Bytes({2, 0}) + U16(1) + Bytes({0, 0, 0, 0}));  // SetEncodings: raw only
  return static_cast<uint8_t>(init[4]) / 8;
}

int RfbViewer::RequestUpdate(int w, int h, int bytes_per_pixel) {
  Send(UpdateRequest(false, w, h));
  std::string head = Take(4);
  if (head.size() != 4 || head[0] != 0) return -1;
  int rects = ReadU16(head, 2);
  for (int i = 0; i < rects; ++i) {
    std::string r = Take(12);
    if (r.size() != 12 || ReadU32(r, 8) != 0) return -1;  // raw only
    size_t n = static_cast<size_t>(ReadU16(r, 4)) * ReadU16(r, 6) * bytes_per_pixel;
    if (Take(n).size() != n) return -1;
  }
  return rects;
}

bool RfbViewer::WaitClosed(int seconds) {
  timeval tv{seconds, 0};
  ::setsockopt(ws_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (;;) {
    beast::flat_buffer buf;
    boost::system::error_code ec;
    ws_.read(buf, ec);
    if (ec) return ec == websocket::error::closed || ec == boost::asio::error::eof ||
                   ec == boost::asio::error::connection_reset;
  }
}

void RfbViewer::Close() {
  boost::system::error_code ec;
  ws_.close(websocket::close_code::normal, ec);
}

}  // namespace berth::testing
