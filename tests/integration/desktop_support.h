// What the desktop integration test runs beside berthd: a real RFB server (QEMU itself, no
// guest: `-S`, a VGA device and VNC on a unix socket), a recording fake RFB server (to see
// exactly which client messages reach the server), and a viewer (a WebSocket client speaking
// raw RFB, as a forged viewer would).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/websocket.hpp>

#include "tests/support/temp_dir.h"

namespace berth::testing {

// qemu-system-x86_64 with VNC on `socket()`; stopped (SIGTERM, then SIGKILL) by its pid.
class QemuVnc {
 public:
  QemuVnc();  // throws when QEMU is missing or its socket does not appear
  ~QemuVnc();
  std::filesystem::path socket() const { return dir_.path() / "vnc.sock"; }

 private:
  TempDir dir_{"berth-qemu-vnc"};
  pid_t pid_ = -1;
};

// An RFB 3.8 server that offers None, answers ClientInit with a 16x16 ServerInit, and records,
// per connection, the ClientInit byte and every byte the client sent after it.
class RecordingRfbServer {
 public:
  // `drop_unread_at_hangup`: as QEMU's VNC server does, a client that hung up is dropped
  // before what it sent last is read (see Serve).
  explicit RecordingRfbServer(bool drop_unread_at_hangup = false);
  ~RecordingRfbServer();
  std::filesystem::path socket() const { return dir_.path() / "rfb.sock"; }
  size_t connections();
  int client_init(size_t connection);
  std::string received(size_t connection);

 private:
  struct Conn {
    int fd = -1;
    int client_init = -1;
    std::string received;
  };
  void Serve(size_t index);

  bool drop_unread_at_hangup_ = false;
  TempDir dir_{"berth-fake-rfb"};
  int listen_fd_ = -1;
  std::mutex mutex_;
  std::vector<std::shared_ptr<Conn>> conns_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
  std::atomic<bool> stop_{false};
};

// A WebSocket viewer of berthd's desktop route, reading and writing raw RFB bytes.
class RfbViewer {
 public:
  // Opens `target` on 127.0.0.1:`port` with these headers (empty: not sent). False when the
  // upgrade was refused; status() then says how.
  bool Open(uint16_t port, const std::string& target, const std::string& origin, const std::string& key = {});
  int status() const { return status_; }
  const std::string& subprotocol() const { return subprotocol_; }
  void Send(const std::string& bytes);
  // Exactly `n` bytes from the server (empty when the connection ended first).
  std::string Take(size_t n);
  // The RFB handshake as a viewer; ServerInit's bytes per pixel.
  int Handshake(int shared);
  // Asks for an update of (0, 0, w, h) and reads it (raw encoding); its rectangle count.
  int RequestUpdate(int w, int h, int bytes_per_pixel);
  // True when the server ends the connection within `seconds` (reading what comes meanwhile).
  bool WaitClosed(int seconds);
  void Close();

 private:
  boost::asio::io_context io_;
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket> ws_{io_};
  std::string buffered_;
  std::string subprotocol_;
  int status_ = 0;
};

// RFB client messages.
std::string PointerEvent(int mask, int x, int y);
std::string KeyEvent(bool down, uint32_t keysym);
std::string UpdateRequest(bool incremental, int w, int h);

}  // namespace berth::testing
