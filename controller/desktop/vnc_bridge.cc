#include "controller/desktop/vnc_bridge.h"

#include <bit>
#include <optional>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "controller/desktop/rfb_parser.h"

namespace berth::desktop {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using http::Task;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

struct State {
  http::WebSocket* ws = nullptr;
  net::Socket* vnc = nullptr;
  // Set on the strand when BridgeViewer returns: the deadline's handler touches nothing then.
  bool finished = false;
  bool viewer_ended = false;  // the WebSocket delivers no more (closed or failed)
  // How the viewer's WebSocket is closed when the bridge ends early (a refused message, the
  // deadline); a normal close otherwise.
  std::optional<websocket::close_reason> close;
  ViewerStats stats;
};

void ShutdownSocket(net::Socket& socket) {
  boost::system::error_code ignored;
  socket.shutdown(asio::socket_base::shutdown_both, ignored);
}

// Stops the bridge with a policy close for the viewer: QEMU's side is shut down, so the
// server -> viewer pump sees the end and closes the WebSocket with `why`.
void EndWithPolicy(State& st, std::string why) {
  if (why.size() > 120) why.resize(120);  // a close reason fits a control frame
  st.stats.error = why;
  st.close = websocket::close_reason(websocket::close_code::policy_error, why);
  ShutdownSocket(*st.vnc);
}

// QEMU -> viewer: the only coroutine that writes to the WebSocket, its close included.
Task<void> ServerToViewer(State& st) {
  std::vector<char> buf(kServerChunk);
  http::WebSocket& ws = *st.ws;
  for (;;) {
    auto [ec, n] = co_await st.vnc->async_read_some(asio::buffer(buf), kTuple);
    if (ec) {
      if (ws.is_open() && !st.viewer_ended) {
        websocket::close_reason reason(websocket::close_code::normal);
        if (st.close) reason = *st.close;
        co_await ws.async_close(reason, kTuple);
      }
      co_return;
    }
    st.stats.to_viewer += n;
    auto [wec, wn] = co_await ws.async_write(asio::buffer(buf.data(), n), kTuple);
    if (wec) {
      // The viewer is gone: end its read, and QEMU's connection with it.
      beast::get_lowest_layer(ws).cancel();
      ShutdownSocket(*st.vnc);
      co_return;
    }
  }
}

// Viewer -> QEMU, through the parser.
Task<void> ViewerToServer(State& st, const Viewer& viewer, DesktopService& desktop) {
  http::WebSocket& ws = *st.ws;
  beast::flat_buffer buf;
  RfbClientParser parser;
  std::string out;
  uint8_t guest_buttons = 0;  // the buttons the guest saw pressed (what passed)
  for (;;) {
    auto [ec, n] = co_await ws.async_read(buf, kTuple);
    if (ec) break;
    auto data = buf.cdata();
    parser.Feed(std::string_view(static_cast<const char*>(data.data()), data.size()));
    buf.consume(buf.size());
    out.clear();
    std::vector<ControlEvent> events;
    std::optional<Error> refused;
    for (;;) {
      auto m = parser.Next();
      if (!m) {
        refused = m.error();
        break;
      }
      if (!*m) break;
      RfbMessage& message = **m;
      st.stats.messages += 1;
      if (message.input != RfbInput::kNone) {
        if (!desktop.control().InputAllowed(viewer.workspace_id, viewer.mode)) {
          st.stats.dropped += 1;
          continue;
        }
        int clicks = 0;
        if (message.type == RfbMessageType::kPointerEvent) {
          clicks = std::popcount(static_cast<unsigned>(message.buttons & ~guest_buttons & 0xff));
          guest_buttons = message.buttons;
        }
        auto ended = desktop.control().NoteInput(viewer.workspace_id, true, viewer.by, clicks, message.keys);
        for (auto& e : ended) events.push_back(std::move(e));
      }
      out += message.bytes;
    }
    if (parser.handshake_done()) st.stats.handshake_done = true;
    desktop.Record(std::move(events));
    if (!out.empty()) {
      // While this write waits for QEMU nothing reads the WebSocket: Beast's idle timer would
      // see no pong and close a viewer that is merely held back (as tunnel::Bridge does).
      websocket::stream_base::timeout saved;
      ws.get_option(saved);
      websocket::stream_base::timeout paused = saved;
      paused.idle_timeout = websocket::stream_base::none();
      ws.set_option(paused);
      auto [wec, wn] = co_await asio::async_write(*st.vnc, asio::buffer(out), kTuple);
      ws.set_option(saved);
      if (wec) {
        beast::get_lowest_layer(ws).cancel();
        ShutdownSocket(*st.vnc);
        co_return;
      }
      st.stats.to_server += out.size();
    }
    if (refused) {
      EndWithPolicy(st, refused->message);
      co_return;
    }
  }
  // The viewer closed (or failed): nothing more goes to QEMU, and nothing from it can reach
  // the viewer.
  st.viewer_ended = true;
  ShutdownSocket(*st.vnc);
}

}  // namespace

Task<ViewerStats> BridgeViewer(http::WebSocket& ws, net::Socket& vnc, const Viewer& viewer,
                               DesktopService& desktop, std::chrono::seconds handshake_timeout) {
  using namespace asio::experimental::awaitable_operators;
  ws.binary(true);
  ws.auto_fragment(false);
  ws.read_message_max(kMaxFrame);
  auto st = std::make_shared<State>();
  st->ws = &ws;
  st->vnc = &vnc;
  // One deadline for the whole handshake. The handler runs on this strand (the timer's
  // executor) and keeps the state alive; after `finished` it touches nothing.
  asio::steady_timer deadline(co_await asio::this_coro::executor, handshake_timeout);
  deadline.async_wait([st](const boost::system::error_code& ec) {
    if (ec || st->finished || st->stats.handshake_done) return;
    EndWithPolicy(*st, "the RFB handshake did not finish in time");
    boost::system::error_code ignored;
    beast::get_lowest_layer(*st->ws).socket().shutdown(asio::socket_base::shutdown_receive, ignored);
  });
  State& state = *st;
  co_await (ServerToViewer(state) && ViewerToServer(state, viewer, desktop));
  st->finished = true;
  deadline.cancel();
  co_return st->stats;
}

}  // namespace berth::desktop
