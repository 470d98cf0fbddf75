// Processes started through the API: spawned with pipes or a PTY, output kept in a bounded
// buffer for replay, reattachable by pid or tag, reaped through pidfds. Finished processes are
// kept for a while so their result and output can still be read. Lives on the I/O thread.
#pragma once

#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "common/error.h"
#include "guest-agent/activity.h"
#include "guest-agent/process_instance.h"
#include "guest-agent/process_spawn.h"

namespace berth::agent {

class ProcessTable {
 public:
  ProcessTable(boost::asio::io_context& io, ActivityTracker& activity);
  ~ProcessTable();
  ProcessTable(const ProcessTable&) = delete;
  ProcessTable& operator=(const ProcessTable&) = delete;

  // Spawns `spec` and records it. already_exists (409) when options.tag names a running
  // process; the spawn's own errors otherwise. I/O thread.
  Result<std::shared_ptr<Process>> Start(const SpawnSpec& spec, Process::Options options);
  // By pid (digits) or tag; a running process wins over finished ones with the same key, then
  // the newest. Null when unknown. I/O thread.
  std::shared_ptr<Process> Find(std::string_view pid_or_tag);
  // Every recorded process, oldest first. I/O thread.
  std::vector<std::shared_ptr<Process>> List();
  // Number of processes started through the API that still run.
  int RunningCount() const;
  // Kills every process group still running (agent shutdown).
  void Shutdown();
  // An activity-tracker stream of `kind` for as long as the result lives. I/O thread. Safe to
  // destroy after the agent: a coroutine frame still suspended at shutdown is destroyed with
  // the io_context, after the tracker, and the guard then sees the tracker gone and touches
  // nothing (ActivityTracker::StreamGuard).
  ActivityTracker::StreamGuard OpenStream(std::string kind) {
    return activity_.OpenStream(std::move(kind));
  }

 private:
  // Forgets finished processes older than kKeepFinished, and all but the newest kMaxFinished.
  void Prune();

  boost::asio::io_context& io_;
  ActivityTracker& activity_;
  std::deque<std::shared_ptr<Process>> processes_;  // in start order
  // Exit callbacks hold this weakly: they may fire while the agent is being torn down.
  std::shared_ptr<ProcessTable*> self_;
};

}  // namespace berth::agent
