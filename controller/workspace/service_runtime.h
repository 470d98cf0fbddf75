// The workspace service's in-memory state per workspace (private to controller/workspace/).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controller/workspace/service.h"

namespace berth::workspace {

struct WorkspaceService::Runtime {
  // Held by the operation running on this workspace: one at a time.
  std::mutex op_mutex;
  // The rest is guarded by WorkspaceService::mutex_.
  std::optional<State> state;  // as last written to the store
  int pending_ops = 0;
  int64_t last_activity = 0;   // unix seconds: API traffic, streams, guest activity
  int64_t last_persisted_activity = 0;
  std::map<std::string, int> streams;  // open proxied streams by kind
  std::vector<std::string> guest_reasons;  // from the agent at the last idle check
  std::optional<int64_t> idle_at;
  std::optional<agent_client::AgentLink> link;  // while running
};

}  // namespace berth::workspace
