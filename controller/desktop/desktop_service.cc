#include "controller/desktop/desktop_service.h"

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "controller/workspace/layout.h"

namespace berth::desktop {

namespace {

ControlOptions ControlOptionsOf(const DesktopConfig& c) {
  ControlOptions o;
  o.lease = std::chrono::seconds(c.lease_s);
  o.viewer_grace = std::chrono::seconds(c.viewer_grace_s);
  return o;
}

Result<int> Seconds(const nlohmann::json& v, std::string_view key, int min, int max) {
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("'{}' must be an integer between {} and {}", key, min, max));
  }
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

Result<DesktopConfig> ParseDesktopConfig(const nlohmann::json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "must be an object");
  DesktopConfig out;
  for (const auto& [k, v] : j.items()) {
    if (k == "lease_s" || k == "viewer_grace_s" || k == "handshake_timeout_s") {
      auto s = Seconds(v, k, 1, 7 * 24 * 3600);
      if (!s) return Fail(s.error());
      (k == "lease_s" ? out.lease_s : k == "viewer_grace_s" ? out.viewer_grace_s : out.handshake_timeout_s) = *s;
    } else if (k == "cdp_port") {
      if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > 65535) {
        return Fail(ErrorCode::kInvalidArgument, "'cdp_port' must be a port number (1-65535)");
      }
      out.cdp_port = static_cast<uint16_t>(v.get<uint64_t>());
    } else if (k == "clipboard_tool") {
      if (!v.is_string() || !v.get<std::string>().starts_with('/') || v.get<std::string>().size() > 1024) {
        return Fail(ErrorCode::kInvalidArgument, "'clipboard_tool' must be an absolute path in the guest");
      }
      out.clipboard_tool = v.get<std::string>();
    } else if (k == "origins") {
      if (!v.is_array()) return Fail(ErrorCode::kInvalidArgument, "'origins' must be a list of strings");
      for (const auto& o : v) {
        if (!o.is_string() || o.get<std::string>().empty()) {
          return Fail(ErrorCode::kInvalidArgument, "'origins' must be a list of strings");
        }
        out.origins.push_back(o.get<std::string>());
      }
    } else {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("unknown key '{}'", k));
    }
  }
  return out;
}

DesktopService::DesktopService(DesktopConfig config, std::filesystem::path data_dir,
                               std::function<int64_t()> clock, boost::asio::io_context& io,
                               boost::asio::thread_pool& pool, EventSink sink)
    : config_(std::move(config)),
      data_dir_(std::move(data_dir)),
      tickets_(clock),
      control_(ControlOptionsOf(config_), clock),
      sink_(std::move(sink)),
      timer_(io),
      recorder_(boost::asio::make_strand(pool.get_executor())) {}

DesktopService::~DesktopService() { Shutdown(); }

void DesktopService::Start() { ScheduleTick(); }

void DesktopService::ScheduleTick() {
  timer_.expires_after(std::chrono::seconds(1));
  // The timer lives on the io_context, whose threads are joined before this is destroyed; a
  // tick after Shutdown does nothing.
  timer_.async_wait([this, stopped = stopped_](const boost::system::error_code& ec) {
    if (ec || stopped->load()) return;
    Record(control_.Tick());
    ScheduleTick();
  });
}

void DesktopService::Shutdown() {
  // The timer is the io_context's: its next tick sees `stopped_` and ends (cancelling it here
  // would race with a tick re-arming it on an I/O thread).
  if (stopped_->exchange(true)) return;
  for (const auto& e : control_.ReleaseAll("berthd_shutdown")) sink_(e);
}

std::filesystem::path DesktopService::VncSocket(const std::string& workspace_id) const {
  if (config_.vnc_socket_for_test) return config_.vnc_socket_for_test(workspace_id);
  return workspace::Layout(data_dir_, workspace_id).vnc_socket();
}

void DesktopService::Record(std::vector<ControlEvent> events) {
  if (events.empty()) return;
  boost::asio::post(recorder_, [this, events = std::move(events)] {
    for (const auto& e : events) sink_(e);
  });
}

void DesktopService::TickForTest() { Record(control_.Tick()); }

}  // namespace berth::desktop
