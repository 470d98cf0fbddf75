#include "controller/desktop/rfb_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace berth::desktop {
namespace {

// ServerInit's desktop name and ServerCutText: the guest's words, bounded.
constexpr uint32_t kMaxName = 4096;
constexpr uint32_t kMaxServerCut = 1u << 20;
constexpr int kRawEncoding = 0;
constexpr int kDesktopSizeEncoding = -223;

uint16_t U16(const char* p) {
  return static_cast<uint16_t>((static_cast<uint8_t>(p[0]) << 8) | static_cast<uint8_t>(p[1]));
}
uint32_t U32(const char* p) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(p[0])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 8) | static_cast<uint32_t>(static_cast<uint8_t>(p[3]));
}
void Put16(std::string& out, uint16_t v) {
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v & 0xff);
}
void Put32(std::string& out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v >> 16));
  Put16(out, static_cast<uint16_t>(v & 0xffff));
}

Error Protocol(std::string_view what) {
  return Error(ErrorCode::kUnavailable, fmt::format("the workspace's screen: {}", what));
}

// Waits until `fd` is ready for `events` or the deadline passes.
Status WaitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    auto left = Remaining(deadline);
    if (left.count() == 0) return Fail(ErrorCode::kDeadlineExceeded, "the workspace's screen did not answer in time");
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
    if (n > 0) return {};
    if (n < 0 && errno != EINTR) return Fail(Protocol(std::strerror(errno)));
  }
}

}  // namespace

Result<RfbClient> RfbClient::Connect(const std::filesystem::path& socket, Deadline deadline) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = socket.string();
  if (path.size() >= sizeof(addr.sun_path)) return Fail(ErrorCode::kInternal, "VNC socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Fail(Protocol(std::strerror(errno)));
  RfbClient client(fd);
  // A unix socket connects at once or not at all (no SYN to wait for).
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Fail(ErrorCode::kUnavailable, "the workspace's screen is not available (is it running?)");
  }
  if (auto s = client.Handshake(deadline); !s) return Fail(s.error());
  return client;
}

RfbClient::RfbClient(RfbClient&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      screen_(other.screen_),
      formatted_(other.formatted_),
      encoded_(other.encoded_) {}

RfbClient& RfbClient::operator=(RfbClient&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    screen_ = other.screen_;
    formatted_ = other.formatted_;
    encoded_ = other.encoded_;
  }
  return *this;
}

RfbClient::~RfbClient() {
  if (fd_ >= 0) ::close(fd_);
}

Status RfbClient::ReadExactly(char* out, size_t n, Deadline deadline) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd_, out + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return Fail(Protocol("QEMU closed the connection"));
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Fail(Protocol(std::strerror(errno)));
    if (auto w = WaitFor(fd_, POLLIN, deadline); !w) return w;
  }
  return {};
}

Status RfbClient::Skip(size_t n, Deadline deadline) {
  char buf[4096];
  while (n > 0) {
    size_t step = std::min(n, sizeof(buf));
    if (auto s = ReadExactly(buf, step, deadline); !s) return s;
    n -= step;
  }
  return {};
}

Status RfbClient::Send(std::string_view bytes, Deadline deadline) {
  while (!bytes.empty()) {
    ssize_t w = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (w > 0) {
      bytes.remove_prefix(static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return Fail(Protocol(std::strerror(errno)));
    if (auto s = WaitFor(fd_, POLLOUT, deadline); !s) return s;
  }
  return {};
}

Status RfbClient::Handshake(Deadline deadline) {
  char version[12];
  if (auto s = ReadExactly(version, sizeof(version), deadline); !s) return s;
  if (std::string_view(version, 4) != "RFB ") return Fail(Protocol("not an RFB server"));
  if (auto s = Send("RFB 003.008\n", deadline); !s) return s;
  char count = 0;
  if (auto s = ReadExactly(&count, 1, deadline); !s) return s;
  if (count == 0) return Fail(Protocol("the server refused the connection"));
  char types[255];
  auto n = static_cast<uint8_t>(count);
  if (auto s = ReadExactly(types, n, deadline); !s) return s;
  if (std::memchr(types, 1, n) == nullptr) return Fail(Protocol("the server offers no security type None"));
  if (auto s = Send(std::string_view("\x01", 1), deadline); !s) return s;
  char result[4];
  if (auto s = ReadExactly(result, 4, deadline); !s) return s;
  if (U32(result) != 0) return Fail(Protocol("the server refused security type None"));
  // Shared: the person's viewers stay connected.
  if (auto s = Send(std::string_view("\x01", 1), deadline); !s) return s;
  char init[24];
  if (auto s = ReadExactly(init, sizeof(init), deadline); !s) return s;
  screen_ = {U16(init), U16(init + 2)};
  if (screen_.width < 1 || screen_.height < 1 || screen_.width > kMaxScreenSide || screen_.height > kMaxScreenSide) {
    return Fail(Protocol(fmt::format("a screen of {}x{} is out of bounds", screen_.width, screen_.height)));
  }
  uint32_t name = U32(init + 20);
  if (name > kMaxName) return Fail(Protocol("the desktop's name is too long"));
  return Skip(name, deadline);
}

namespace {

// SetEncodings: raw, and DesktopSize so a resize is told, not misread.
std::string SetEncodings() {
  std::string out("\x02\x00", 2);
  Put16(out, 2);
  Put32(out, static_cast<uint32_t>(kRawEncoding));
  Put32(out, static_cast<uint32_t>(kDesktopSizeEncoding));
  return out;
}

}  // namespace

Status RfbClient::PrepareInput(Deadline deadline) {
  if (encoded_) return {};
  encoded_ = true;
  return Send(SetEncodings(), deadline);
}

std::string RfbClient::Formats() {
  std::string out;
  if (!formatted_) {
    // SetPixelFormat: 32 bits a pixel, depth 24, little-endian true colour, red at bit 16.
    out += std::string("\x00\x00\x00\x00", 4);
    out += std::string("\x20\x18\x00\x01", 4);
    Put16(out, 255);
    Put16(out, 255);
    Put16(out, 255);
    out += std::string("\x10\x08\x00\x00\x00\x00", 6);
    formatted_ = true;
  }
  if (!encoded_) {
    out += SetEncodings();
    encoded_ = true;
  }
  return out;
}

namespace {

// FramebufferUpdateRequest, not incremental: the server answers at once.
std::string UpdateRequest(int x, int y, int w, int h) {
  std::string out("\x03\x00", 2);
  Put16(out, static_cast<uint16_t>(x));
  Put16(out, static_cast<uint16_t>(y));
  Put16(out, static_cast<uint16_t>(w));
  Put16(out, static_cast<uint16_t>(h));
  return out;
}

}  // namespace

Result<Frame> RfbClient::Capture(Deadline deadline) {
  std::string out = Formats() + UpdateRequest(0, 0, screen_.width, screen_.height);
  if (auto s = Send(out, deadline); !s) return Fail(s.error());
  Frame frame;
  for (;;) {
    auto painted = ReadUpdate(&frame, deadline);
    if (!painted) return Fail(painted.error());
    if (*painted) return frame;
    // Only a resize (or nothing): ask for the screen at its size now.
    if (auto s = Send(UpdateRequest(0, 0, screen_.width, screen_.height), deadline); !s) return Fail(s.error());
  }
}

Status RfbClient::Sync(Deadline deadline) {
  if (auto s = Send(Formats() + UpdateRequest(0, 0, 1, 1), deadline); !s) return s;
  auto painted = ReadUpdate(nullptr, deadline);
  if (!painted) return Fail(painted.error());
  return {};
}

Result<bool> RfbClient::ReadUpdate(Frame* frame, Deadline deadline) {
  for (;;) {
    char type = 0;
    if (auto s = ReadExactly(&type, 1, deadline); !s) return Fail(s.error());
    switch (static_cast<uint8_t>(type)) {
      case 0: {  // FramebufferUpdate
        char head[3];
        if (auto s = ReadExactly(head, 3, deadline); !s) return Fail(s.error());
        uint16_t rects = U16(head + 1);
        bool painted = false;
        for (uint16_t i = 0; i < rects; ++i) {
          char r[12];
          if (auto s = ReadExactly(r, sizeof(r), deadline); !s) return Fail(s.error());
          int x = U16(r), y = U16(r + 2), w = U16(r + 4), h = U16(r + 6);
          auto encoding = static_cast<int32_t>(U32(r + 8));
          if (encoding == kDesktopSizeEncoding) {
            if (w < 1 || h < 1 || w > kMaxScreenSide || h > kMaxScreenSide) {
              return Fail(Protocol(fmt::format("a screen of {}x{} is out of bounds", w, h)));
            }
            // The screen changed size: what was drawn is void.
            screen_ = {w, h};
            if (frame != nullptr) *frame = Frame{};
            painted = false;
            continue;
          }
          if (encoding != kRawEncoding) return Fail(Protocol(fmt::format("unrequested encoding {}", encoding)));
          if (x + w > screen_.width || y + h > screen_.height) {
            return Fail(Protocol("a rectangle outside the screen"));
          }
          if (frame == nullptr) {
            if (auto s = Skip(static_cast<size_t>(w) * h * 4, deadline); !s) return Fail(s.error());
            painted = true;
            continue;
          }
          if (frame->rgb.empty()) {
            frame->size = screen_;
            frame->rgb.assign(static_cast<size_t>(screen_.width) * screen_.height * 3, '\0');
          }
          std::vector<char> row(static_cast<size_t>(w) * 4);
          for (int line = 0; line < h; ++line) {
            if (auto s = ReadExactly(row.data(), row.size(), deadline); !s) return Fail(s.error());
            char* dst = frame->rgb.data() + (static_cast<size_t>(y + line) * screen_.width + x) * 3;
            for (int px = 0; px < w; ++px) {
              // Little-endian 0x00RRGGBB: B, G, R, unused.
              dst[px * 3] = row[px * 4 + 2];
              dst[px * 3 + 1] = row[px * 4 + 1];
              dst[px * 3 + 2] = row[px * 4];
            }
          }
          painted = true;
        }
        return painted;
      }
      case 1: {  // SetColourMapEntries: not for a true-colour format, skipped all the same
        char head[5];
        if (auto s = ReadExactly(head, 5, deadline); !s) return Fail(s.error());
        if (auto s = Skip(static_cast<size_t>(U16(head + 3)) * 6, deadline); !s) return Fail(s.error());
        break;
      }
      case 2:  // Bell
        break;
      case 3: {  // ServerCutText: the guest's clipboard, not wanted here
        char head[7];
        if (auto s = ReadExactly(head, 7, deadline); !s) return Fail(s.error());
        uint32_t n = U32(head + 3);
        if (n > kMaxServerCut) return Fail(Protocol("the guest's clipboard text is too long"));
        if (auto s = Skip(n, deadline); !s) return Fail(s.error());
        break;
      }
      default:
        return Fail(Protocol(fmt::format("unexpected server message {}", static_cast<int>(static_cast<uint8_t>(type)))));
    }
  }
}

}  // namespace berth::desktop
