// One viewer's bridge: a WebSocket from the viewer (noVNC, or any RFB client speaking binary
// frames) and a new connection of its own to the workspace's VNC socket (QEMU serves several
// clients at once; the shared flag is forced, so none disconnects another).
//
// Contracts:
//  - server -> viewer: QEMU's bytes pass untouched, one binary frame per read (the guest's
//    data: berthd never interprets it). At most one frame in flight; a slow viewer stalls the
//    reads from QEMU (QEMU then coalesces updates), nothing grows.
//  - viewer -> server: every byte goes through RfbClientParser. Input (keys, pointer,
//    clipboard, desktop size, xvp) passes only while DesktopControl::InputAllowed says so for
//    this viewer's mode (a `view` viewer: never); dropped messages are counted. The rest passes
//    as parsed (the shared flag and SetEncodings may be rewritten). At most one write in
//    flight; the buffer holds one frame plus one partial message (bounded: frames by
//    kMaxFrame, messages by the parser).
//  - a message the parser refuses ends the bridge: the viewer gets close code 1008 (policy)
//    with the reason, QEMU's connection is shut down.
//  - one total handshake deadline: a viewer whose ClientInit has not gone through within
//    `handshake_timeout` of the start is dropped, whatever it trickles.
//  - either side ending ends both: QEMU's EOF closes the WebSocket normally (1000), a viewer
//    that closes or fails shuts QEMU's connection down.
// Call on the executor that owns both objects (the HTTP connection's strand); they must
// outlive the call.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/http/types.h"
#include "common/net/socket.h"
#include "controller/desktop/desktop_service.h"
#include "controller/desktop/rfb_parser.h"

namespace berth::desktop {

// A WebSocket message from a viewer, at most (ClientCutText's limit plus room for the
// messages around it in one frame).
inline constexpr size_t kMaxFrame = kMaxCutText + 64 * 1024;
// One read from QEMU, one frame to the viewer.
inline constexpr size_t kServerChunk = 64 * 1024;

struct Viewer {
  std::string workspace_id;
  ViewerMode mode = ViewerMode::kView;
  std::string by;  // who it acts for (the key id that opened it or issued its ticket)
};

struct ViewerStats {
  uint64_t to_viewer = 0;  // bytes from QEMU to the viewer
  uint64_t to_server = 0;  // bytes from the viewer to QEMU (after filtering)
  uint64_t messages = 0;   // whole client messages parsed
  uint64_t dropped = 0;    // input messages dropped (no control)
  bool handshake_done = false;
  std::string error;  // why the bridge ended early (a refused message, the deadline), if it did
};

http::Task<ViewerStats> BridgeViewer(http::WebSocket& ws, net::Socket& vnc, const Viewer& viewer,
                                     DesktopService& desktop, std::chrono::seconds handshake_timeout);

}  // namespace berth::desktop
