#include "controller/desktop/cdp_bridge.h"

#include <limits>
#include <optional>
#include <string_view>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "controller/desktop/cdp_gate.h"

namespace berth::desktop {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using http::Task;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

struct State {
  explicit State(const asio::any_io_executor& executor)
      : write_done(executor, std::chrono::steady_clock::time_point::max()) {}
  http::WebSocket* client = nullptr;
  http::WebSocket* chrome = nullptr;
  // One write to the client at a time: Chrome's messages, berthd's refusals and the close.
  // Waiters wait on `write_done`, which never expires: the writer cancels it when done.
  bool writing = false;
  asio::steady_timer write_done;
  bool client_ended = false;  // the client's WebSocket delivers no more
  // How the client's WebSocket is closed when the bridge ends early; normally otherwise.
  std::optional<websocket::close_reason> close;
  CdpStats stats;
};

void Shutdown(http::WebSocket& ws) {
  boost::system::error_code ignored;
  beast::get_lowest_layer(ws).socket().shutdown(asio::socket_base::shutdown_both, ignored);
}

// Ends the bridge with a policy close for the client: Chrome's connection is shut down, so the
// Chrome -> client pump sees the end and closes the client's WebSocket with `why`.
void EndWithPolicy(State& st, std::string why) {
  if (why.size() > 120) why.resize(120);  // a close reason fits a control frame
  if (st.stats.error.empty()) st.stats.error = why;
  if (!st.close) st.close = websocket::close_reason(websocket::close_code::policy_error, why);
  Shutdown(*st.chrome);
}

constexpr std::string_view kPrivate =
    "a person took over the desktop privately: the DevTools tunnel is closed until they hand back";

Task<void> LockWrites(State& st) {
  while (st.writing) co_await st.write_done.async_wait(kTuple);
  st.writing = true;
}

void UnlockWrites(State& st) {
  st.writing = false;
  st.write_done.cancel();
}

Task<boost::system::error_code> SendToClient(State& st, std::string_view text) {
  co_await LockWrites(st);
  st.client->text(true);
  auto [ec, n] = co_await st.client->async_write(asio::buffer(text.data(), text.size()), kTuple);
  UnlockWrites(st);
  co_return ec;
}

// Chrome -> client: the only coroutine that closes the client's WebSocket.
Task<void> ChromeToClient(State& st, const CdpClient& who, DesktopService& desktop) {
  beast::flat_buffer buf;
  for (;;) {
    auto [ec, n] = co_await st.chrome->async_read(buf, kTuple);
    if (!ec && !desktop.control().CheckAgentScreen(who.workspace_id)) {
      EndWithPolicy(st, std::string(kPrivate));
      ec = asio::error::operation_aborted;
    }
    if (ec) {
      Shutdown(*st.chrome);
      if (st.client->is_open() && !st.client_ended) {
        websocket::close_reason reason(websocket::close_code::normal);
        if (st.close) reason = *st.close;
        co_await LockWrites(st);
        co_await st.client->async_close(reason, kTuple);
        UnlockWrites(st);
      }
      co_return;
    }
    auto data = buf.cdata();
    std::string_view text(static_cast<const char*>(data.data()), data.size());
    auto wec = co_await SendToClient(st, text);
    buf.consume(buf.size());
    if (wec) {
      // The client is gone: end its read, and Chrome's connection with it.
      beast::get_lowest_layer(*st.client).cancel();
      Shutdown(*st.chrome);
      co_return;
    }
    st.stats.to_client += 1;
  }
}

// Client -> Chrome, through the gate: the only coroutine that writes to Chrome.
Task<void> ClientToChrome(State& st, const CdpClient& who, DesktopService& desktop) {
  beast::flat_buffer buf;
  auto& control = desktop.control();
  for (;;) {
    auto [ec, n] = co_await st.client->async_read(buf, kTuple);
    if (ec) break;
    auto data = buf.cdata();
    std::string_view text(static_cast<const char*>(data.data()), data.size());
    auto call = ParseCdpCall(text);
    if (!call) {
      EndWithPolicy(st, "not a DevTools call: " + call.error().message);
      co_return;
    }
    st.stats.calls += 1;
    if (!control.CheckAgentScreen(who.workspace_id)) {
      EndWithPolicy(st, std::string(kPrivate));
      co_return;
    }
    if (CdpMethodChangesPage(call->method)) {
      auto allowed = control.CheckAgentInput(who.workspace_id);
      if (!allowed) {
        st.stats.refused += 1;
        std::string answer = CdpRefusal(*call, call->method + ": " + allowed.error().message);
        buf.consume(buf.size());
        auto wec = co_await SendToClient(st, answer);
        if (wec) break;
        continue;
      }
      CdpInput input = CdpInputOf(*call);
      if (input.clicks > 0 || input.keys > 0) {
        desktop.Record(control.NoteInput(who.workspace_id, false, who.by, input.clicks, input.keys));
      }
    }
    // While this write waits for Chrome nothing reads the client: Beast's idle timer would
    // see no pong and close a client that is merely held back (as vnc_bridge does).
    websocket::stream_base::timeout saved;
    st.client->get_option(saved);
    websocket::stream_base::timeout paused = saved;
    paused.idle_timeout = websocket::stream_base::none();
    st.client->set_option(paused);
    st.chrome->text(true);
    auto [wec, wn] = co_await st.chrome->async_write(buf.cdata(), kTuple);
    st.client->set_option(saved);
    buf.consume(buf.size());
    if (wec) {
      beast::get_lowest_layer(*st.client).cancel();
      Shutdown(*st.chrome);
      co_return;
    }
  }
  // The client closed (or failed): close Chrome's side, which ends the other pump.
  st.client_ended = true;
  if (st.chrome->is_open()) {
    auto [cec] = co_await st.chrome->async_close(websocket::close_code::normal, kTuple);
    (void)cec;
  }
  Shutdown(*st.chrome);
}

}  // namespace

Task<CdpStats> BridgeCdp(http::WebSocket& client, http::WebSocket& chrome, const CdpClient& who,
                         DesktopService& desktop) {
  using namespace asio::experimental::awaitable_operators;
  client.read_message_max(kMaxCdpClientMessage);
  chrome.read_message_max(kMaxCdpServerMessage);
  client.auto_fragment(false);
  chrome.auto_fragment(false);
  State st(co_await asio::this_coro::executor);
  st.client = &client;
  st.chrome = &chrome;
  co_await (ChromeToClient(st, who, desktop) && ClientToChrome(st, who, desktop));
  co_return st.stats;
}

}  // namespace berth::desktop
