// Per-tenant limits (issue 12, "Floods and stalls"): how many workspaces a tenant has (in any
// state), the vCPUs and memory of those that hold the host's resources (a VM is running or on
// its way up or down), and the sum of their data disks. Pure: the workspace service counts the
// use and decides under its admission lock; this says whether an ask fits.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/error.h"
#include "common/v1/admin.h"
#include "controller/workspace/workspace.h"

namespace berth::workspace {

// A tenant's limits. The defaults suit one host with a few tenants: vCPUs are overcommitted
// (an idle guest costs 3-5 % of a core), memory is not (a guest's memory is the host's), and
// qcow2 disks are sparse, so the disk limit bounds what a tenant may grow into, not what it
// takes today.
struct Limits {
  int64_t workspaces = 50;
  int64_t vcpus = 16;
  int64_t memory_mib = 32 * 1024;
  int64_t disk_gib = 2048;
};
// The largest limit an operator may set: far past one host, small enough that sums never
// overflow.
inline constexpr int64_t kMaxLimit = v1::kMaxTenantLimit;

// An operator's limits for one tenant; each one not set follows berthd's default.
struct LimitOverrides {
  std::optional<int64_t> workspaces;
  std::optional<int64_t> vcpus;
  std::optional<int64_t> memory_mib;
  std::optional<int64_t> disk_gib;
};
Limits Resolve(const Limits& defaults, const LimitOverrides& overrides);

// What a tenant uses (or an action asks for), in the units of Limits.
struct QuotaUse {
  int64_t workspaces = 0;
  int64_t vcpus = 0;       // of workspaces that hold host resources (HoldsHost)
  int64_t memory_mib = 0;  // likewise
  int64_t disk_gib = 0;
};

// Whether a workspace in `state` counts at all: every state but deleting (its delete is under
// way and cannot be undone, so a tenant that deletes one may create another at once).
bool CountsTowardsQuota(State state);
// Whether it holds the host's CPUs and memory: a VM exists or is about to (creating boots at
// once; stopping and hibernating still run until they are done). Stopped, hibernated and error
// do not: starting them again asks for their size anew.
bool HoldsHost(State state);
// What `ws` adds to its tenant's use.
QuotaUse UseOf(const Workspace& ws);

// Fails with quota_exceeded naming the first limit that `in_use + requested` passes, e.g.
// "tenant t_acme would use 10 vCPUs of its limit of 8", with details {limit, allowed, in_use,
// requested}. Only the parts of `requested` above zero are checked, so an ask that adds no
// vCPUs is never refused for vCPUs the tenant already has over a lowered limit.
Status CheckQuota(std::string_view tenant, const Limits& limits, const QuotaUse& in_use,
                  const QuotaUse& requested);

}  // namespace berth::workspace
