// POST /v1/diff (berthd's only): what changed between a checkpoint's disks, which berthd has
// plugged in, and another checkpoint's or this guest as it is now (diff.h,
// common/protocol/diff.h): files under the workspace directory and the default user's home,
// and the Debian packages installed.
#include <fstream>
#include <sstream>

#include "common/blocking.h"
#include "common/protocol/diff.h"
#include "guest-agent/api_context.h"
#include "guest-agent/diff.h"
#include "guest-agent/users.h"

namespace berth::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Where the plugged disks are mounted while they are compared (root's, 0700).
const fs::path kMountDir = "/run/berth-agent/diff";
// How long a hot-plugged disk may take to appear in /sys/block.
constexpr std::chrono::seconds kPlugWait{20};
// A dpkg status file is a few MiB; past this it is not one.
constexpr std::streamsize kMaxStatus = 64 << 20;

std::string ReadStatus(const fs::path& root) {
  if (root.empty()) return {};
  std::ifstream in(root / "var/lib/dpkg/status", std::ios::binary);
  std::string text(static_cast<size_t>(kMaxStatus), '\0');
  in.read(text.data(), kMaxStatus);
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// `abs` ("/home/agent") inside the tree mounted at `root`; empty (no tree) when nothing is.
fs::path Inside(const fs::path& root, const std::string& abs) {
  if (root.empty()) return {};
  return root / fs::path(abs).relative_path();
}

Result<protocol::DiffResult> Compare(const protocol::DiffRequest& request, const std::string& workspace,
                                     const std::string& home) {
  auto started = Clock::now();
  auto plugged = started + kPlugWait;
  auto mount = [&](const std::string& serial) { return DiskMount::Mount(serial, kMountDir, plugged); };
  auto from_root = mount(request.from.root);
  if (!from_root) return Fail(from_root.error());
  auto from_data = mount(request.from.data);
  if (!from_data) return Fail(from_data.error());
  std::unique_ptr<DiskMount> to_root_mount, to_data_mount;
  fs::path to_root = "/", to_data = workspace;
  if (request.to) {
    auto root = mount(request.to->root);
    if (!root) return Fail(root.error());
    auto data = mount(request.to->data);
    if (!data) return Fail(data.error());
    to_root_mount = std::move(*root);
    to_data_mount = std::move(*data);
    to_root = to_root_mount->path();
    to_data = to_data_mount->path();
  }
  protocol::DiffResult result;
  DiffLimits limits{request.max_entries, started + std::chrono::milliseconds(request.budget_ms)};
  if (DiffTree((*from_data)->path(), to_data, workspace, limits, result)) {
    DiffTree(Inside((*from_root)->path(), home), Inside(to_root, home), home, limits, result);
  }
  DiffPackages(ParseDpkgStatus(ReadStatus((*from_root)->path())), ParseDpkgStatus(ReadStatus(to_root)), result);
  result.took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  return result;
}

http::Task<void> Diff(ApiContext ctx, http::Exchange& ex) {
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto request = protocol::DiffRequestFromJson(*body);
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  // Only a guest's agent (the one that may change the machine's identity) mounts disks.
  if (ctx.options.identity_root != "/") {
    co_await ex.SendError({ErrorCode::kFailedPrecondition, "this agent is not a guest's: it mounts no disks"});
    co_return;
  }
  auto user = ResolveUser(ctx.options.default_user);
  if (!user) {
    co_await ex.SendError(user.error());
    co_return;
  }
  if (!user->home.starts_with('/') || user->home == "/") {
    co_await ex.SendError({ErrorCode::kFailedPrecondition, "the default user has no home directory to compare"});
    co_return;
  }
  auto compare = [request = *request, workspace = ctx.options.workspace_dir, home = user->home] {
    return Compare(request, workspace, home);
  };
  auto result = co_await RunBlocking(ctx.blocking, std::move(compare));
  if (!result) {
    co_await ex.SendError(result.error());
    co_return;
  }
  co_await ex.SendJson(http::bhttp::status::ok, protocol::ToJson(*result));
}

}  // namespace

void AddDiffRoute(http::Router& router, ApiContext& ctx) {
  router.Add(http::bhttp::verb::post, "/v1/diff",
             [ctx](http::Exchange& ex) -> http::Task<void> { return Diff(ctx, ex); });
}

}  // namespace berth::agent
