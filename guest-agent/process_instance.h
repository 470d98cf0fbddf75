// One process started through the API, after the fork: its output pumped into a ring buffer,
// its exit awaited on a pidfd, its stdin, signals, PTY size and timeout. Readers follow its
// output; "pacing" readers (a client streaming it live) hold the pumps back so that output is
// read from the child only as fast as that client takes it. With no pacing reader the output
// flows freely into the ring (the oldest dropped), so a process never blocks on a gone client.
//
// Everything here runs on the agent's I/O thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/http/types.h"
#include "common/protocol/exec.h"
#include "guest-agent/process_output.h"
#include "guest-agent/process_spawn.h"

namespace berth::agent {

class Process : public std::enable_shared_from_this<Process> {
 public:
  using Clock = std::chrono::system_clock;

  struct Options {
    Options() = default;
    nlohmann::json cmd;  // as the caller gave it, for listings
    std::string user;
    std::optional<std::string> tag;
    std::optional<std::chrono::milliseconds> timeout;
    // Written to stdin, which is then closed.
    std::optional<std::string> stdin_data;
  };

  // What a reader gets next.
  struct Item {
    enum class Kind { kData, kEnd, kTimeout, kWoken };
    Item() = default;  // not an aggregate: see the g++ 12 note in common/error.h
    Kind kind = Kind::kTimeout;
    OutputStream stream = OutputStream::kStdout;
    uint64_t offset = 0;
    std::string data;
  };

  class Reader {
   public:
    ~Reader();
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
    // The next output chunk; kEnd once the process has ended and its output was all read;
    // kTimeout after `wait` without news; kWoken after Wake().
    http::Task<Item> Next(std::chrono::milliseconds wait);
    // The next chunk if one is buffered now, kEnd if the output is complete, else kTimeout.
    Item Poll();
    // Makes a pending Next() return kWoken (another coroutine has something for the owner).
    void Wake();

   private:
    friend class Process;
    Reader(std::shared_ptr<Process> process, bool pacing, uint64_t stdout_from,
           uint64_t stderr_from);
    std::optional<Item> Take();
    std::shared_ptr<Process> process_;
    bool pacing_;
    uint64_t next_seq_ = 0;
    uint64_t from_[2];
    boost::asio::steady_timer timer_;
    bool woken_ = false;
  };

  // Takes over a spawned child: starts the output pumps, the reaper and the timeout.
  static std::shared_ptr<Process> Adopt(boost::asio::io_context& io, SpawnedProcess spawned,
                                        Options options, bool pty);
  ~Process();

  int pid() const { return pid_; }
  const std::optional<std::string>& tag() const { return options_.tag; }
  bool running() const { return !exited_; }
  // Exited, and its output complete: pipes at their end, or kOutputGrace after the exit (a
  // background grandchild may keep the pipes open for ever).
  bool output_done() const { return output_done_; }
  bool pty() const { return pty_; }
  protocol::ExitStatus exit_status() const;
  protocol::ProcessInfo Info() const;
  Clock::time_point ended_at() const { return ended_at_; }

  // A reader from the start of what the ring still holds, skipping bytes of each stream
  // below the given offsets.
  std::unique_ptr<Reader> Subscribe(bool pacing, uint64_t stdout_from = 0,
                                    uint64_t stderr_from = 0);

  // True while stdin can be written (a pipe kept open, or a PTY) and the process runs.
  bool has_stdin() const;
  // Writes all of `data` (waits while another write is in progress).
  http::Task<Status> WriteStdin(std::string_view data);
  // Closes a stdin pipe; on a PTY sends the EOF character (^D).
  http::Task<Status> CloseStdin();
  // Sends `signo` to the process group. failed_precondition once exited.
  Status Signal(int signo);
  Status Resize(const protocol::PtySize& size);
  // SIGKILL to the process group, if it still runs.
  void Kill();
  // Waits until the process exited; false after `timeout`.
  http::Task<bool> WaitExit(std::chrono::milliseconds timeout);
  // Called once when the process exits.
  void SetOnExit(std::function<void()> on_exit) { on_exit_ = std::move(on_exit); }
  // Closes the pipes and stops the pumps (the table forgets the process).
  void Dispose();

 private:
  Process(boost::asio::io_context& io, Options options, bool pty);
  http::Task<void> Pump(OutputStream stream, boost::asio::posix::stream_descriptor& fd);
  http::Task<void> Reap();
  http::Task<void> EnforceTimeout();
  http::Task<void> FeedStdin(std::string data);
  // Waits until Notify() (true) or `wait` passes (false).
  http::Task<bool> WaitForChange(boost::asio::steady_timer& timer,
                                 std::chrono::milliseconds wait);
  void Notify();
  bool PumpHeldBack() const;

  boost::asio::io_context& io_;
  Options options_;
  bool pty_;
  pid_t pid_ = -1;
  Clock::time_point started_at_ = Clock::now();
  std::chrono::steady_clock::time_point started_steady_ = std::chrono::steady_clock::now();
  Clock::time_point ended_at_{};
  uint64_t duration_ms_ = 0;
  bool exited_ = false;
  bool output_done_ = false;
  bool timed_out_ = false;
  std::optional<int> exit_code_;
  std::optional<int> signal_;
  int open_pumps_ = 0;
  bool disposed_ = false;

  std::optional<boost::asio::posix::stream_descriptor> pidfd_;
  std::optional<boost::asio::posix::stream_descriptor> stdout_;
  std::optional<boost::asio::posix::stream_descriptor> stderr_;
  std::optional<boost::asio::posix::stream_descriptor> stdin_;  // pipes only
  boost::asio::steady_timer timeout_timer_;
  bool stdin_busy_ = false;
  bool stdin_closed_ = false;

  OutputRing ring_;
  std::vector<Reader*> pacing_readers_;
  std::vector<boost::asio::steady_timer*> waiters_;
  std::function<void()> on_exit_;
};

}  // namespace berth::agent
