// berthd's own RFB 3.8 client on a workspace's VNC socket: the agent's hands and eyes
// (screenshots and computer-use actions, desktop_routes.cc). The agent's input goes in over
// the same socket the person's viewers use, as RFB input, so control applies to both alike.
//
// One connection per call (a screenshot, a batch of actions): the socket is local and the
// handshake a few hundred bytes, so nothing is kept open between calls and a stuck QEMU costs
// one call, never the next. Blocking, with one total deadline per call: run it on the pool.
//
// The server's bytes are the guest's screen and QEMU's framing; treated as untrusted all the
// same: every length is bounded before anything is allocated (screen size, desktop name,
// rectangles inside the screen, cut text), and anything but what was asked for fails closed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/deadline.h"
#include "common/error.h"

namespace berth::desktop {

// The largest screen accepted from a server, each way.
inline constexpr int kMaxScreenSide = 8192;

struct ScreenSize {
  int width = 0;
  int height = 0;
};

// A captured screen: RGB, 3 bytes a pixel, rows top to bottom.
struct Frame {
  ScreenSize size;
  std::string rgb;
};

class RfbClient {
 public:
  // Connects to the unix socket at `socket` and completes the handshake (version 3.8,
  // security None, a shared ClientInit, ServerInit read) by `deadline`.
  static Result<RfbClient> Connect(const std::filesystem::path& socket, Deadline deadline);

  RfbClient(RfbClient&& other) noexcept;
  RfbClient& operator=(RfbClient&& other) noexcept;
  RfbClient(const RfbClient&) = delete;
  RfbClient& operator=(const RfbClient&) = delete;
  ~RfbClient();

  // The screen's size as ServerInit (or a later DesktopSize) said.
  ScreenSize screen() const { return screen_; }
  // The whole screen, now (a non-incremental update, raw encoding, 32 bits a pixel).
  Result<Frame> Capture(Deadline deadline);
  // Call once before input: SetEncodings (raw, DesktopSize). QEMU keeps a client that never
  // sent SetEncodings in relative pointer mode whatever the guest's pointer device is (the
  // first position is dropped and the rest move the guest's pointer by differences, which the
  // guest accelerates); after it, QEMU sends absolute positions to the guest's tablet.
  Status PrepareInput(Deadline deadline);
  // Writes client messages (KeyEvent, PointerEvent: rfb_input.h makes them) by `deadline`.
  Status Send(std::string_view messages, Deadline deadline);
  // Returns once the server has read and acted on everything sent before: a non-incremental
  // update of one pixel, which the server answers after the messages before it. Call it
  // before hanging up after input: QEMU drops what it has not yet read from a client that
  // hung up (it checks for the hang-up before reading), so input sent just before a close is
  // lost at random.
  Status Sync(Deadline deadline);

 private:
  explicit RfbClient(int fd) : fd_(fd) {}
  Status ReadExactly(char* out, size_t n, Deadline deadline);
  Status Skip(size_t n, Deadline deadline);
  Status Handshake(Deadline deadline);
  // SetPixelFormat (32 bits a pixel) and SetEncodings, each the first time only.
  std::string Formats();
  // Server messages up to the end of the next FramebufferUpdate: whether it painted anything
  // (false: only a resize). Its pixels into `frame`, or skipped when null.
  Result<bool> ReadUpdate(Frame* frame, Deadline deadline);

  int fd_ = -1;
  ScreenSize screen_;
  bool formatted_ = false;  // SetPixelFormat sent
  bool encoded_ = false;    // SetEncodings sent
};

}  // namespace berth::desktop
