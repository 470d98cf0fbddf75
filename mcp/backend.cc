// The Backend calls that have a default: those a backend may not serve yet (backend.h says
// which and why). The default names the way that works, so a model can tell the user.
#include "mcp/backend.h"

namespace berth::mcp {
namespace {

Error NotServed() {
  return Error{ErrorCode::kFailedPrecondition,
               "checkpoints are not served by this MCP server yet; use `berth mcp` or the API "
               "(/v1/workspaces/{ws}/checkpoints)"};
}

}  // namespace

Result<v1::Checkpoint> Backend::CreateCheckpoint(std::string_view, const v1::CreateCheckpoint&, Deadline) {
  return Fail(NotServed());
}

Result<std::vector<v1::Checkpoint>> Backend::ListCheckpoints(std::string_view, Deadline) {
  return Fail(NotServed());
}

Result<client::CheckpointRestore> Backend::RestoreCheckpoint(std::string_view, std::string_view,
                                                             const v1::RestoreCheckpoint&, Deadline) {
  return Fail(NotServed());
}

}  // namespace berth::mcp
