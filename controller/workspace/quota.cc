#include "controller/workspace/quota.h"

#include <fmt/format.h>

#include "common/json.h"

namespace berth::workspace {

Limits Resolve(const Limits& defaults, const LimitOverrides& overrides) {
  Limits out = defaults;
  if (overrides.workspaces) out.workspaces = *overrides.workspaces;
  if (overrides.vcpus) out.vcpus = *overrides.vcpus;
  if (overrides.memory_mib) out.memory_mib = *overrides.memory_mib;
  if (overrides.disk_gib) out.disk_gib = *overrides.disk_gib;
  return out;
}

bool CountsTowardsQuota(State state) { return state != State::kDeleting; }

bool HoldsHost(State state) {
  switch (state) {
    case State::kCreating:
    case State::kStarting:
    case State::kRunning:
    case State::kStopping:
    case State::kHibernating:
      return true;
    case State::kStopped:
    case State::kHibernated:
    case State::kDeleting:
    case State::kError:
      return false;
  }
  return false;
}

QuotaUse UseOf(const Workspace& ws) {
  QuotaUse use;
  if (!CountsTowardsQuota(ws.state)) return use;
  use.workspaces = 1;
  use.disk_gib = ws.disk_gib;
  if (HoldsHost(ws.state)) {
    use.vcpus = ws.vcpus;
    use.memory_mib = ws.memory_mib;
  }
  return use;
}

Status CheckQuota(std::string_view tenant, const Limits& limits, const QuotaUse& in_use,
                  const QuotaUse& requested) {
  struct Row {
    const char* limit;  // the field's name, as the API names it
    int64_t allowed;
    int64_t in_use;
    int64_t requested;
    const char* unit;   // "10 vCPUs", "4096 MiB of memory"
  };
  const Row rows[] = {
      {"workspaces", limits.workspaces, in_use.workspaces, requested.workspaces, "workspaces"},
      {"vcpus", limits.vcpus, in_use.vcpus, requested.vcpus, "vCPUs"},
      {"memory_mib", limits.memory_mib, in_use.memory_mib, requested.memory_mib, "MiB of memory"},
      {"disk_gib", limits.disk_gib, in_use.disk_gib, requested.disk_gib, "GiB of disk"},
  };
  for (const auto& row : rows) {
    if (row.requested <= 0 || row.in_use + row.requested <= row.allowed) continue;
    nlohmann::json details = {{"limit", row.limit},
                              {"allowed", row.allowed},
                              {"in_use", row.in_use},
                              {"requested", row.requested}};
    return Fail(Error{ErrorCode::kQuotaExceeded,
                      fmt::format("tenant {} would use {} {} of its limit of {} ({} in use, {} asked "
                                  "for); stop or delete a workspace, or ask the operator to raise "
                                  "'{}'",
                                  tenant, row.in_use + row.requested, row.unit, row.allowed,
                                  row.in_use, row.requested, row.limit),
                      DumpJson(details)});
  }
  return {};
}

}  // namespace berth::workspace
