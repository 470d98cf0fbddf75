#include "controller/desktop/agent_hands.h"

#include <cstdlib>
#include <optional>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "common/blocking.h"
#include "controller/desktop/rfb_input.h"

namespace berth::desktop {

Result<double> ParseScale(const std::optional<std::string>& raw) {
  if (!raw) return 1.0;
  char* end = nullptr;
  double v = std::strtod(raw->c_str(), &end);
  if (raw->empty() || end != raw->c_str() + raw->size() || !(v >= kMinScale && v <= 1.0)) {
    return Fail(ErrorCode::kInvalidArgument, "'scale' is a number from 0.05 to 1");
  }
  return v;
}

Result<Screenshot> TakeScreenshot(DesktopService& desk, const std::string& workspace_id,
                                  const ScreenshotRequest& request, Deadline deadline) {
  if (!(request.scale >= kMinScale && request.scale <= 1.0)) {
    return Fail(ErrorCode::kInvalidArgument, "'scale' is a number from 0.05 to 1");
  }
  if (auto allowed = desk.control().CheckAgentScreen(workspace_id); !allowed) return Fail(allowed.error());
  auto client = RfbClient::Connect(desk.VncSocket(workspace_id), deadline);
  if (!client) return Fail(client.error());
  auto frame = client->Capture(deadline);
  if (!frame) return Fail(frame.error());
  Frame scaled = ScaleFrame(*frame, request.scale);
  auto bytes = EncodeFrame(scaled, request.format, request.quality);
  if (!bytes) return Fail(bytes.error());
  return Screenshot{frame->size, scaled.size, request.format, std::move(*bytes)};
}

boost::asio::awaitable<Result<ActionsDone>> RunActions(DesktopService& desk, boost::asio::thread_pool& pool,
                                                       std::string workspace_id, nlohmann::json request,
                                                       std::string by) {
  if (auto allowed = desk.control().CheckAgentInput(workspace_id); !allowed) co_return Fail(allowed.error());
  auto deadline = DeadlineIn(kActionsDeadline);
  auto socket = desk.VncSocket(workspace_id);
  struct Opened {
    RfbClient client;
    CompiledInput input;
  };
  // By-reference captures only: the closure is trivially destructible (docs/architecture.md).
  auto opened = co_await RunBlocking(pool, [&]() -> Result<Opened> {
    auto client = RfbClient::Connect(socket, deadline);
    if (!client) return Fail(client.error());
    auto input = CompileActions(request, client->screen());
    if (!input) return Fail(input.error());
    if (auto prepared = client->PrepareInput(deadline); !prepared) return Fail(prepared.error());
    return Opened{std::move(*client), std::move(*input)};
  });
  if (!opened) co_return Fail(opened.error());
  size_t sent = 0;
  std::optional<Error> stopped;
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  for (const auto& step : opened->input.steps) {
    // A person may take over between two steps: the rest is theirs to decide.
    if (auto allowed = desk.control().CheckAgentInput(workspace_id); !allowed) {
      stopped = allowed.error();
      break;
    }
    if (!step.messages.empty()) {
      auto wrote = co_await RunBlocking(pool, [&] { return opened->client.Send(step.messages, deadline); });
      if (!wrote) {
        stopped = wrote.error();
        break;
      }
    }
    ++sent;
    if (step.then.count() > 0) {
      timer.expires_after(step.then);
      co_await timer.async_wait(boost::asio::use_awaitable);
    }
  }
  // Before hanging up: the server must have read it all (RfbClient::Sync), or QEMU may drop
  // the last of it, a click or a key combination, when it sees the hang-up first.
  if (sent > 0 && !stopped) {
    auto synced = co_await RunBlocking(pool, [&] { return opened->client.Sync(deadline); });
    if (!synced) stopped = synced.error();
  }
  // The agent's input on the timeline, per burst like a person's.
  if (sent > 0) desk.Record(desk.control().NoteInput(workspace_id, false, by, opened->input.clicks, opened->input.keys));
  if (stopped) {
    Error e = *stopped;
    e.message += fmt::format(" ({} of {} steps of this request were sent)", sent, opened->input.steps.size());
    co_return Fail(e);
  }
  co_return ActionsDone{opened->input.actions, opened->client.screen()};
}

}  // namespace berth::desktop
