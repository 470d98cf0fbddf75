#include "guest-agent/process_instance.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace berth::agent {
namespace {

namespace asio = boost::asio;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// Per process, the output kept for replay and reattach. 1 MiB holds a long build log's tail or
// many screens of a terminal, and bounds the table's memory (at most kMaxFinished + running
// processes each hold this much).
constexpr size_t kRingCapacity = 1u << 20;
// How far the pumps may run ahead of the slowest pacing reader. Enough to keep the pipe and the
// socket both busy (a few reads of kReadChunk), small against the ring, so a pacing reader never
// loses data to the ring dropping old chunks.
constexpr uint64_t kPacingWindow = 256u << 10;
// One read from a pipe or PTY; a pipe holds 64 KiB by default.
constexpr size_t kReadChunk = 64u << 10;
// After the process exits, how long to wait for its pipes to reach their end before the
// output counts as complete. Grandchildren left running in the background may hold the pipes
// open for ever; this must not keep an exec request open with them.
constexpr std::chrono::milliseconds kOutputGrace{200};
constexpr auto kForever = std::chrono::hours(24 * 365);

std::string Iso8601(Process::Clock::time_point t) {
  return fmt::format("{:%FT%T}Z", std::chrono::floor<std::chrono::milliseconds>(t));
}

}  // namespace

// --- Reader -----------------------------------------------------------------------------------

Process::Reader::Reader(std::shared_ptr<Process> process, bool pacing, uint64_t stdout_from,
                        uint64_t stderr_from)
    : process_(std::move(process)),
      pacing_(pacing),
      from_{stdout_from, stderr_from},
      timer_(process_->io_) {
  if (pacing_) process_->pacing_readers_.push_back(this);
}

Process::Reader::~Reader() {
  if (pacing_) {
    auto& v = process_->pacing_readers_;
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
    process_->Notify();  // a pump held back for this reader may go on
  }
}

std::optional<Process::Item> Process::Reader::Take() {
  auto& ring = process_->ring_;
  for (;;) {
    const OutputChunk* c = ring.At(next_seq_);
    if (c == nullptr) return std::nullopt;
    next_seq_ = c->seq + 1;
    int s = static_cast<int>(c->stream);
    uint64_t end = c->offset + c->data.size();
    if (end <= from_[s]) continue;  // all of it already seen
    uint64_t skip = from_[s] > c->offset ? from_[s] - c->offset : 0;
    from_[s] = end;
    Item item;
    item.kind = Item::Kind::kData;
    item.stream = c->stream;
    item.offset = c->offset + skip;
    item.data = c->data.substr(skip);
    if (pacing_) process_->Notify();  // the pumps may be waiting for this reader
    return item;
  }
}

Process::Item Process::Reader::Poll() {
  if (auto item = Take()) return std::move(*item);
  Item item;
  item.kind = process_->output_done_ ? Item::Kind::kEnd : Item::Kind::kTimeout;
  return item;
}

http::Task<Process::Item> Process::Reader::Next(std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    if (auto item = Take()) co_return std::move(*item);
    Item item;
    if (process_->output_done_) {
      item.kind = Item::Kind::kEnd;
      co_return item;
    }
    if (woken_) {
      woken_ = false;
      item.kind = Item::Kind::kWoken;
      co_return item;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) co_return item;  // kTimeout
    co_await process_->WaitForChange(
        timer_, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
  }
}

void Process::Reader::Wake() {
  woken_ = true;
  timer_.cancel();
}

// --- Process ----------------------------------------------------------------------------------

Process::Process(asio::io_context& io, Options options, bool pty)
    : io_(io), options_(std::move(options)), pty_(pty), timeout_timer_(io), ring_(kRingCapacity) {}

Process::~Process() = default;

std::shared_ptr<Process> Process::Adopt(asio::io_context& io, SpawnedProcess spawned,
                                        Options options, bool pty) {
  std::shared_ptr<Process> p(new Process(io, std::move(options), pty));
  p->pid_ = spawned.pid;
  p->pidfd_.emplace(io, spawned.pidfd.release());
  if (pty) {
    p->stdout_.emplace(io, spawned.pty_master.release());
  } else {
    p->stdout_.emplace(io, spawned.stdout_fd.release());
    p->stderr_.emplace(io, spawned.stderr_fd.release());
    if (spawned.stdin_fd) p->stdin_.emplace(io, spawned.stdin_fd.release());
  }
  if (!p->stdin_ && !pty) p->stdin_closed_ = true;
  asio::co_spawn(io, [p]() { return p->Pump(OutputStream::kStdout, *p->stdout_); },
                 asio::detached);
  if (p->stderr_) {
    asio::co_spawn(io, [p]() { return p->Pump(OutputStream::kStderr, *p->stderr_); },
                   asio::detached);
  }
  p->open_pumps_ = p->stderr_ ? 2 : 1;
  asio::co_spawn(io, [p]() { return p->Reap(); }, asio::detached);
  if (p->options_.timeout) {
    asio::co_spawn(io, [p]() { return p->EnforceTimeout(); }, asio::detached);
  }
  if (p->options_.stdin_data) {
    std::string data = std::move(*p->options_.stdin_data);
    p->options_.stdin_data.reset();
    asio::co_spawn(io, [p, data = std::move(data)]() mutable { return p->FeedStdin(std::move(data)); },
                   asio::detached);
  }
  return p;
}

bool Process::PumpHeldBack() const {
  for (const Reader* r : pacing_readers_) {
    if (ring_.total() - ring_.BytesBefore(r->next_seq_) >= kPacingWindow) return true;
  }
  return false;
}

http::Task<void> Process::Pump(OutputStream stream, asio::posix::stream_descriptor& fd) {
  auto self = shared_from_this();
  asio::steady_timer timer(io_);
  std::vector<char> buf(kReadChunk);
  for (;;) {
    while (PumpHeldBack() && !disposed_) co_await WaitForChange(timer, kForever);
    if (disposed_) break;
    auto [ec, n] = co_await fd.async_read_some(asio::buffer(buf), kTuple);
    // EOF on a pipe; EIO on a PTY master once every slave side is closed.
    if (ec) break;
    ring_.Append(stream, std::string_view(buf.data(), n));
    Notify();
  }
  --open_pumps_;
  Notify();
}

http::Task<void> Process::Reap() {
  auto self = shared_from_this();
  siginfo_t info{};
  int rc = -1;
  for (;;) {
    auto [ec] = co_await pidfd_->async_wait(asio::posix::descriptor_base::wait_read, kTuple);
    if (ec && disposed_) co_return;
    do {
      rc = waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_->native_handle()), &info,
                  WEXITED);
    } while (rc != 0 && errno == EINTR);
    // The pidfd is non-blocking: a readiness that came before the whole process had exited (a
    // spurious wake-up, or a leader thread gone before the others) says EAGAIN. Wait again;
    // treating it as the end left the child a zombie and its exit code null (seen 1 in ~120
    // execs under load).
    if (rc != 0 && errno == EAGAIN && !ec) continue;
    break;
  }
  if (rc != 0) {
    spdlog::error("waitid for pid {}: {}", pid_, strerror(errno));
  } else if (info.si_code == CLD_EXITED) {
    exit_code_ = info.si_status;
  } else {
    signal_ = info.si_status;
    exit_code_ = 128 + info.si_status;
  }
  exited_ = true;
  ended_at_ = Clock::now();
  duration_ms_ = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - started_steady_)
                                           .count());
  timeout_timer_.cancel();
  boost::system::error_code ignored;
  pidfd_->close(ignored);
  Notify();
  if (on_exit_) on_exit_();

  asio::steady_timer timer(io_);
  auto deadline = std::chrono::steady_clock::now() + kOutputGrace;
  while (open_pumps_ > 0 && !disposed_) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    co_await WaitForChange(timer,
                           std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
  }
  output_done_ = true;
  Notify();
}

http::Task<void> Process::EnforceTimeout() {
  auto self = shared_from_this();
  timeout_timer_.expires_after(*options_.timeout);
  auto [ec] = co_await timeout_timer_.async_wait(kTuple);
  if (ec || exited_) co_return;
  timed_out_ = true;
  Kill();
}

http::Task<void> Process::FeedStdin(std::string data) {
  auto self = shared_from_this();
  auto status = co_await WriteStdin(data);
  if (!status) spdlog::debug("stdin of pid {}: {}", pid_, status.error().message);
  co_await CloseStdin();
}

http::Task<bool> Process::WaitForChange(asio::steady_timer& timer, std::chrono::milliseconds wait) {
  timer.expires_after(wait);
  waiters_.push_back(&timer);
  auto [ec] = co_await timer.async_wait(kTuple);
  waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), &timer), waiters_.end());
  co_return ec == asio::error::operation_aborted;
}

void Process::Notify() {
  // Copy: a cancelled waiter does not run (and unregister) before this loop ends, but be safe.
  auto waiters = waiters_;
  for (auto* t : waiters) t->cancel();
}

protocol::ExitStatus Process::exit_status() const {
  protocol::ExitStatus s;
  s.exit_code = exit_code_;
  if (signal_) s.signal = protocol::SignalName(*signal_);
  s.timed_out = timed_out_;
  s.duration_ms = exited_ ? duration_ms_
                          : static_cast<uint64_t>(
                                std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - started_steady_)
                                    .count());
  return s;
}

protocol::ProcessInfo Process::Info() const {
  protocol::ProcessInfo info;
  info.pid = pid_;
  info.tag = options_.tag;
  info.cmd = options_.cmd;
  info.user = options_.user;
  info.pty = pty_;
  info.running = !exited_;
  info.exit = exit_status();
  info.started_at = Iso8601(started_at_);
  if (exited_) info.ended_at = Iso8601(ended_at_);
  info.stdout_bytes = ring_.stream_end(OutputStream::kStdout);
  info.stderr_bytes = ring_.stream_end(OutputStream::kStderr);
  return info;
}

std::unique_ptr<Process::Reader> Process::Subscribe(bool pacing, uint64_t stdout_from,
                                                    uint64_t stderr_from) {
  return std::unique_ptr<Reader>(
      new Reader(shared_from_this(), pacing, stdout_from, stderr_from));
}

bool Process::has_stdin() const {
  if (exited_ || disposed_ || stdin_closed_) return false;
  return pty_ ? stdout_.has_value() && stdout_->is_open() : stdin_.has_value() && stdin_->is_open();
}

http::Task<Status> Process::WriteStdin(std::string_view data) {
  auto self = shared_from_this();
  asio::steady_timer timer(io_);
  // One write at a time: bytes of two writers must not interleave mid-write.
  while (stdin_busy_) co_await WaitForChange(timer, kForever);
  if (!has_stdin()) {
    co_return Fail(ErrorCode::kFailedPrecondition,
                   exited_ ? "the process has ended" : "the process has no open stdin");
  }
  stdin_busy_ = true;
  auto& fd = pty_ ? *stdout_ : *stdin_;
  auto [ec, n] = co_await asio::async_write(fd, asio::buffer(data.data(), data.size()), kTuple);
  stdin_busy_ = false;
  Notify();
  if (ec) {
    co_return Fail(ErrorCode::kFailedPrecondition, fmt::format("write to stdin: {}", ec.message()));
  }
  co_return Status{};
}

http::Task<Status> Process::CloseStdin() {
  auto self = shared_from_this();
  if (pty_) {
    if (!has_stdin()) co_return Fail(ErrorCode::kFailedPrecondition, "the process has ended");
    // The terminal's EOF character: what a person types to end input.
    termios t{};
    char eof = 4;
    if (tcgetattr(stdout_->native_handle(), &t) == 0 && t.c_cc[VEOF] != 0) eof = static_cast<char>(t.c_cc[VEOF]);
    std::string s(1, eof);
    co_return co_await WriteStdin(s);
  }
  asio::steady_timer timer(io_);
  while (stdin_busy_) co_await WaitForChange(timer, kForever);
  if (stdin_closed_) co_return Status{};
  stdin_closed_ = true;
  if (stdin_) {
    boost::system::error_code ignored;
    stdin_->close(ignored);
  }
  co_return Status{};
}

Status Process::Signal(int signo) {
  if (exited_) return Fail(ErrorCode::kFailedPrecondition, "the process has ended");
  if (kill(-pid_, signo) != 0) {
    // The child may have left its process group (setsid/setpgid of its own); reach it alone.
    if (kill(pid_, signo) != 0) return Fail(ErrnoError(errno, fmt::format("kill {}", pid_)));
  }
  return {};
}

Status Process::Resize(const protocol::PtySize& size) {
  if (!pty_) return Fail(ErrorCode::kFailedPrecondition, "the process has no terminal");
  if (!stdout_ || !stdout_->is_open()) return Fail(ErrorCode::kFailedPrecondition, "the terminal is closed");
  winsize ws{};
  ws.ws_col = size.cols;
  ws.ws_row = size.rows;
  if (ioctl(stdout_->native_handle(), TIOCSWINSZ, &ws) != 0) return Fail(ErrnoError(errno, "TIOCSWINSZ"));
  return {};
}

void Process::Kill() {
  if (exited_) {
    // The leader is gone, but members of its group may live on (holding the pipes).
    if (!output_done_) kill(-pid_, SIGKILL);
    return;
  }
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
}

http::Task<bool> Process::WaitExit(std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  asio::steady_timer timer(io_);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exited_) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) co_return false;
    co_await WaitForChange(timer, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
  }
  co_return true;
}

void Process::Dispose() {
  if (disposed_) return;
  disposed_ = true;
  boost::system::error_code ignored;
  if (stdout_) stdout_->close(ignored);
  if (stderr_) stderr_->close(ignored);
  if (stdin_) stdin_->close(ignored);
  timeout_timer_.cancel();
  if (!exited_) {
    // Only at shutdown: running processes are never forgotten. Reap what we killed.
    Kill();
  }
  output_done_ = output_done_ || exited_;
  Notify();
}

}  // namespace berth::agent
