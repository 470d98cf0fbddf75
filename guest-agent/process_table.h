// Processes started through the API: spawned with pipes or a PTY, output kept in a bounded
// buffer for replay, reattachable by pid or tag, reaped through pidfds. Lives on the I/O thread.
// (Skeleton: the exec work fills this in.)
#pragma once

#include <boost/asio/io_context.hpp>

#include "guest-agent/activity.h"

namespace berth::agent {

class ProcessTable {
 public:
  ProcessTable(boost::asio::io_context& io, ActivityTracker& activity);
  ~ProcessTable();
  // Number of processes started through the API that still run.
  int RunningCount() const;
  // Kills every process group still running (agent shutdown).
  void Shutdown();

 private:
  boost::asio::io_context& io_;
  ActivityTracker& activity_;
};

}  // namespace berth::agent
