#include "cli/session.h"

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <thread>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "cli/terminal.h"
#include "common/json.h"

namespace berth::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;

// Bytes read from stdin per frame.
constexpr size_t kStdinChunk = 64 * 1024;
// Forwarded signals before the client gives up on the remote process and leaves.
constexpr int kSignalsBeforeGivingUp = 3;

// Writes all of `data`; false on an error (errno set).
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Shared between the pump and the stdin thread, which may outlive the pump (blocked in read).
// The pump's io_context is only touched under `mutex` while `closed` is false.
struct StdinShared {
  std::mutex mutex;
  std::condition_variable cv;
  bool closed = false;
  bool sent = true;  // the last chunk was written to the WebSocket: read the next one
};

class Pump {
 public:
  Pump(client::WebSocketConnection& conn, const SessionOptions& options)
      : ws_(conn.socket()), io_(conn.io()), options_(options), signals_(io_), timer_(io_) {}

  Result<protocol::ExitStatus> Run() {
    signals_.add(SIGINT);
    signals_.add(SIGTERM);
    signals_.add(SIGHUP);
    if (options_.pty) signals_.add(SIGWINCH);
    WaitSignal();
    if (options_.timeout) {
      timer_.expires_after(*options_.timeout);
      timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec && !done_) SendSignal("KILL");
      });
    }
    Read();
    if (options_.forward_stdin) {
      StartStdinThread();
    } else {
      Send(Outgoing{true, R"({"type":"close_stdin"})", false});  // the command reads EOF
    }
    io_.restart();
    while (!done_ && io_.run_one() > 0) {
    }
    {
      std::lock_guard lock(stdin_->mutex);
      stdin_->closed = true;
      stdin_->cv.notify_all();
    }
    boost::system::error_code ignored;
    signals_.cancel(ignored);
    timer_.cancel();
    if (gave_up_signal_ != 0) {
      protocol::ExitStatus status;
      status.exit_code = 128 + gave_up_signal_;
      return status;
    }
    if (end_) return *end_;
    if (error_) return Fail(*error_);
    return Fail(ErrorCode::kUnavailable, "the session ended without the command's exit status");
  }

 private:
  struct Outgoing {
    bool text = false;
    std::string data;
    bool stdin_chunk = false;  // tell the stdin thread when written
  };

  void Finish() { done_ = true; }

  void Read() {
    buffer_.clear();
    ws_.async_read(buffer_, [this](beast::error_code ec, size_t) {
      if (ec) {
        if (ec != websocket::error::closed && !end_ && !error_) {
          error_ = Error{ErrorCode::kUnavailable, "session: " + ec.message()};
        }
        Finish();
        return;
      }
      std::string data = beast::buffers_to_string(buffer_.data());
      if (ws_.got_text()) {
        OnControl(data);
      } else if (!data.empty()) {
        auto channel = static_cast<unsigned char>(data[0]);
        std::string_view payload = std::string_view(data).substr(1);
        int fd = channel == http::kChannelStderr ? options_.err_fd : options_.out_fd;
        if ((channel == http::kChannelStdout || channel == http::kChannelStderr) && !output_gone_ &&
            !WriteAll(fd, payload)) {
          // Like a local pipeline: the reader went away, the writer gets SIGPIPE.
          output_gone_ = true;
          SendSignal("PIPE");
        }
      }
      Read();
    });
  }

  void OnControl(const std::string& text) {
    auto msg = ParseJson(text);
    if (!msg) return;  // not JSON: nothing to act on
    auto event = protocol::ExecEvent::FromJson(*msg);
    if (!event) return;  // a message this client does not know
    if (event->type == protocol::ExecEvent::Type::kEnd) end_ = event->exit;
    if (event->type == protocol::ExecEvent::Type::kError && event->error) {
      // A refused control message (a bad resize, say) does not end the session.
      error_ = *event->error;
    }
  }

  void Send(Outgoing out) {
    queue_.push_back(std::move(out));
    if (!writing_) WriteNext();
  }

  void SendSignal(std::string_view name) {
    nlohmann::json msg = {{"type", "signal"}, {"signal", std::string(name)}};
    Send(Outgoing{true, DumpJson(msg), false});
  }

  void WriteNext() {
    if (queue_.empty() || done_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    Outgoing& front = queue_.front();
    ws_.text(front.text);
    ws_.async_write(asio::buffer(front.data), [this](beast::error_code ec, size_t) {
      bool stdin_chunk = queue_.front().stdin_chunk;
      queue_.pop_front();
      if (stdin_chunk) {
        std::lock_guard lock(stdin_->mutex);
        stdin_->sent = true;
        stdin_->cv.notify_all();
      }
      if (ec) {
        // The read side sees the same failure and ends the session.
        writing_ = false;
        return;
      }
      WriteNext();
    });
  }

  void WaitSignal() {
    signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      if (signo == SIGWINCH) {
        if (auto size = WindowSize(options_.in_fd)) {
          nlohmann::json msg = {{"type", "resize"}, {"cols", size->cols}, {"rows", size->rows}};
          Send(Outgoing{true, DumpJson(msg), false});
        }
      } else if (++signals_seen_ >= kSignalsBeforeGivingUp) {
        gave_up_signal_ = signo;
        Finish();
        return;
      } else {
        SendSignal(protocol::SignalName(signo));
      }
      WaitSignal();
    });
  }

  // Handlers posted by the stdin thread may outlive the pump in the io_context's queue (run
  // by a later Close()): they check this first.
  static bool PumpAlive(StdinShared& shared) {
    std::lock_guard lock(shared.mutex);
    return !shared.closed;
  }

  void StartStdinThread() {
    auto shared = stdin_;
    int fd = options_.in_fd;
    asio::io_context* io = &io_;
    std::thread([shared, fd, io, this] {
      std::string buf(kStdinChunk, '\0');
      for (;;) {
        ssize_t n = read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        std::unique_lock lock(shared->mutex);
        if (shared->closed) return;
        if (n <= 0) {
          // EOF (or a read error, which ends the input just the same).
          asio::post(*io, [this, shared] {
            if (!PumpAlive(*shared)) return;
            Send(Outgoing{true, R"({"type":"close_stdin"})", false});
          });
          return;
        }
        std::string frame;
        frame.reserve(static_cast<size_t>(n) + 1);
        frame.push_back(static_cast<char>(http::kChannelStdin));
        frame.append(buf.data(), static_cast<size_t>(n));
        shared->sent = false;
        asio::post(*io, [this, shared, frame = std::move(frame)]() mutable {
          if (!PumpAlive(*shared)) return;
          Send(Outgoing{false, std::move(frame), true});
        });
        // One chunk in flight: a remote process that does not read holds the local reader.
        shared->cv.wait(lock, [&] { return shared->sent || shared->closed; });
        if (shared->closed) return;
      }
    }).detach();
  }

  http::WebSocket& ws_;
  asio::io_context& io_;
  SessionOptions options_;
  asio::signal_set signals_;
  asio::steady_timer timer_;
  std::shared_ptr<StdinShared> stdin_ = std::make_shared<StdinShared>();
  beast::flat_buffer buffer_;
  std::deque<Outgoing> queue_;
  bool writing_ = false;
  bool done_ = false;
  bool output_gone_ = false;
  int signals_seen_ = 0;
  int gave_up_signal_ = 0;
  std::optional<protocol::ExitStatus> end_;
  std::optional<Error> error_;
};

}  // namespace

Result<std::unique_ptr<client::WebSocketConnection>> OpenExecSession(
    client::ApiClient& client, std::string_view scope, const protocol::SessionStart& start) {
  auto ws = client.OpenWebSocket(fmt::format("{}/exec/ws", scope));
  if (!ws) return Fail(ws.error());
  if (auto sent = (*ws)->SendText(DumpJson(start.ToJson())); !sent) return Fail(sent.error());
  for (;;) {
    auto frame = (*ws)->Read(std::chrono::seconds(60));
    if (!frame) return Fail(frame.error());
    if (!frame->text) continue;
    auto msg = ParseJson(frame->data);
    if (!msg || !msg->is_object()) continue;  // not a message this client knows
    auto type_field = OptionalString(*msg, "type");
    std::string type = type_field ? type_field->value_or("") : "";
    if (type == "started") return std::move(*ws);
    if (type == "error") {
      auto event = protocol::ExecEvent::FromJson(*msg);
      if (event && event->error) return Fail(*event->error);
      return Fail(ErrorCode::kInternal, "the session was refused");
    }
  }
}

Result<protocol::ExitStatus> RunSession(client::WebSocketConnection& ws,
                                        const SessionOptions& options) {
  Pump pump(ws, options);
  return pump.Run();
}

}  // namespace berth::cli
