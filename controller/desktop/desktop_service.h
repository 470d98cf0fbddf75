// The desktop's owner in berthd: tickets (tickets.h), control (control.h), where each
// workspace's VNC socket is, and the timeline events all of it produces. The API's desktop
// routes (controller/api/desktop_routes.cc) and the bridge (vnc_bridge.h) call it; the
// workspace layer never sees RFB, and the hypervisor stays behind its interface (the socket's
// path is the workspace layout's, which the domain XML also uses).
//
// Threads: every method may be called from any thread and never blocks, except Shutdown.
// Events are recorded in the order they were produced, on a strand of the pool given at
// construction (the sink writes SQLite). A timer on the io_context runs the control's Tick
// every second (leases, viewer grace, input bursts).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/desktop/control.h"
#include "controller/desktop/tickets.h"

namespace berth::desktop {

// The operator's settings ("desktop": {...} in berthd's config file).
struct DesktopConfig {
  // A takeover's lease, renewed by the person's input ("lease_s").
  int lease_s = 15 * 60;
  // How long a takeover outlives its last control viewer ("viewer_grace_s").
  int viewer_grace_s = 30;
  // From the WebSocket's upgrade to the viewer's ClientInit, in total: a viewer that does not
  // finish the RFB handshake by then is dropped ("handshake_timeout_s"). noVNC takes
  // milliseconds; a slowloris viewer holds QEMU's connection no longer.
  int handshake_timeout_s = 10;
  // Browser origins allowed besides berthd's own (the request's Host), e.g. the address of a
  // TLS proxy in front of berthd: "https://berth.example.com" ("origins").
  std::vector<std::string> origins;
  // The guest port of Chrome's DevTools endpoint (the desktop image starts Chromium with
  // --remote-debugging-port=9222 on the guest's loopback), which `…/desktop/cdp` tunnels to
  // ("cdp_port").
  uint16_t cdp_port = 9222;
  // The guest's clipboard tool (`get` prints it, `set` takes stdin), run by the agent for
  // …/desktop/clipboard: the desktop image's (desktop/clipboard.h), or an image of the
  // operator's own with the same contract ("clipboard_tool", an absolute path).
  std::string clipboard_tool = "/usr/local/lib/berth/clipboard";
  // Tests: where every workspace's VNC socket is (a QEMU or a fake RFB server the test runs);
  // unset: the workspace layout's run/vnc.sock.
  std::function<std::filesystem::path(const std::string& workspace_id)> vnc_socket_for_test;
  // Tests: the clock of tickets and leases (unix seconds); unset: the system's.
  std::function<int64_t()> clock_for_test;
};
Result<DesktopConfig> ParseDesktopConfig(const nlohmann::json& j);

class DesktopService {
 public:
  // Writes one event to a workspace's timeline; blocking (WorkspaceService::RecordEvent).
  using EventSink = std::function<void(const ControlEvent&)>;

  DesktopService(DesktopConfig config, std::filesystem::path data_dir, std::function<int64_t()> clock,
                 boost::asio::io_context& io, boost::asio::thread_pool& pool, EventSink sink);
  ~DesktopService();
  DesktopService(const DesktopService&) = delete;
  DesktopService& operator=(const DesktopService&) = delete;

  // Starts the tick timer. Call once.
  void Start();
  // Stops ticking, hands every person's control back to the agent and records it (so the
  // timeline says why a restarted berthd has the agent in control). Blocking; idempotent.
  void Shutdown();

  DesktopTickets& tickets() { return tickets_; }
  DesktopControl& control() { return control_; }
  const DesktopConfig& config() const { return config_; }
  std::filesystem::path VncSocket(const std::string& workspace_id) const;
  // Records `events` in order, off the caller's thread.
  void Record(std::vector<ControlEvent> events);
  // One tick, now (tests with a fake clock).
  void TickForTest();

 private:
  void ScheduleTick();

  DesktopConfig config_;
  std::filesystem::path data_dir_;
  DesktopTickets tickets_;
  DesktopControl control_;
  EventSink sink_;
  boost::asio::steady_timer timer_;
  boost::asio::strand<boost::asio::thread_pool::executor_type> recorder_;
  std::shared_ptr<std::atomic<bool>> stopped_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace berth::desktop
