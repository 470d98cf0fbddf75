// The agent's eyes and hands on a workspace's screen, as the API routes
// (api/desktop_routes.cc) and berthd's MCP tools (api/local_backend.cc) both use them: a
// screenshot, and a batch of computer-use actions, each over a connection of berthd's own to
// the VNC socket (rfb_client.h), with the person's control checked first (and, for actions,
// before every step). The caller has authorised the request and woken the workspace.
#pragma once

#include <chrono>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "common/deadline.h"
#include "common/error.h"
#include "controller/desktop/desktop_service.h"
#include "controller/desktop/rfb_client.h"
#include "controller/desktop/screen_image.h"

namespace berth::desktop {

// One call's limits: a screenshot's, a batch of actions' (its pauses included).
inline constexpr std::chrono::seconds kScreenshotDeadline{30};
inline constexpr std::chrono::seconds kActionsDeadline{60};

// The smallest scale a screenshot takes (a 1280x800 screen: 64x40).
inline constexpr double kMinScale = 0.05;

struct ScreenshotRequest {
  ImageFormat format = ImageFormat::kPng;
  double scale = 1.0;  // kMinScale-1
  int quality = 80;    // JPEG
};

struct Screenshot {
  ScreenSize screen;
  ScreenSize image;
  ImageFormat format = ImageFormat::kPng;
  std::string bytes;
};

// "0.5": a scale from 0.05 to 1 (nullopt: 1); invalid_argument otherwise.
Result<double> ParseScale(const std::optional<std::string>& raw);

// The screen now; invalid_argument for a scale out of range, locked (423) during a private
// takeover. Blocking: call it off I/O threads.
Result<Screenshot> TakeScreenshot(DesktopService& desk, const std::string& workspace_id,
                                  const ScreenshotRequest& request, Deadline deadline);

struct ActionsDone {
  size_t actions = 0;
  ScreenSize screen;
};

// Runs a request of actions (rfb_input.h) as `by` (a key id): locked while a person holds
// control, checked again before each step (a takeover stops the rest: locked, saying how many
// steps were sent); invalid_argument, before anything is sent, for a bad action. The connection
// and the sends run on `pool`, the pauses on timers of the calling executor. Counted as the
// agent's input on the timeline.
boost::asio::awaitable<Result<ActionsDone>> RunActions(DesktopService& desk, boost::asio::thread_pool& pool,
                                                       std::string workspace_id, nlohmann::json request,
                                                       std::string by);

}  // namespace berth::desktop
