#include "guest-agent/process_table.h"

namespace berth::agent {

ProcessTable::ProcessTable(boost::asio::io_context& io, ActivityTracker& activity)
    : io_(io), activity_(activity) {
  activity_.SetRunningProcessCounter([this] { return RunningCount(); });
}
ProcessTable::~ProcessTable() = default;
int ProcessTable::RunningCount() const { return 0; }
void ProcessTable::Shutdown() {}

}  // namespace berth::agent
