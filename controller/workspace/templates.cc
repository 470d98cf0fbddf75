// Templates: a tenant's checkpoints with memory under names (docs/architecture.md, "Forks").
// A workspace made from one is a fork of its checkpoint (forks.cc): it resumes the template's
// memory, its processes (a started database, a dev server) already running, instead of booting.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "controller/workspace/service_internal.h"

namespace berth::workspace {

Task<Result<store::Template>> WorkspaceService::CreateTemplate(std::string tenant_id, TemplateRequest request) {
  if (stopping_) co_return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
  auto found = Lookup(tenant_id, request.workspace);
  if (!found) co_return Fail(found.error());
  ActorPtr source = *found;
  std::string checkpoint = request.checkpoint.value_or("");
  if (checkpoint.empty()) {
    CheckpointRequest take;
    take.name = "template-" + request.name;
    take.memory = true;
    auto taken = co_await TakeCheckpoint(tenant_id, source->id(), take, request.by);
    if (!taken) {
      co_return Fail(taken.error().code, "checkpointing the workspace for the template: " + taken.error().message);
    }
    checkpoint = taken->id;
  }
  auto publish = [this, &tenant_id, &request, &checkpoint, source]() -> Result<store::Template> {
    auto c = store_.GetCheckpoint(source->id(), checkpoint);
    if (!c) return Fail(c.error());
    if (c->state != "ready") {
      return Fail(ErrorCode::kNotFound, fmt::format("checkpoint '{}' is still being taken", checkpoint));
    }
    if (!c->memory) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("checkpoint '{}' has no memory: a template resumes a running machine; take one with "
                              "\"memory\": true of the running workspace (or leave out the checkpoint)",
                              c->name));
    }
    store::Template t;
    t.id = NewId("tpl");
    t.tenant_id = tenant_id;
    t.name = request.name;
    t.workspace_id = source->id();
    t.checkpoint_id = c->id;
    t.created_by = store::KeyActor(request.by);
    t.created_at = Now();
    if (auto s = store_.InsertTemplate(t); !s) return Fail(s.error());
    spdlog::info("template {} ({}): checkpoint {} of workspace {}", t.name, t.id, c->id, source->id());
    return t;
  };
  co_return co_await Blocking(std::move(publish));
}

Result<std::vector<store::Template>> WorkspaceService::ListTemplates(const std::string& tenant_id) {
  return store_.ListTemplates(tenant_id);
}

Result<store::Template> WorkspaceService::GetTemplate(const std::string& tenant_id, const std::string& id_or_name) {
  return store_.GetTemplate(tenant_id, id_or_name);
}

Result<store::Template> WorkspaceService::DeleteTemplate(const std::string& tenant_id, const std::string& id_or_name) {
  auto t = store_.GetTemplate(tenant_id, id_or_name);
  if (!t) return Fail(t.error());
  // Forks made from it stand on the checkpoint, which stays its workspace's: they go on.
  if (auto s = store_.DeleteTemplate(t->id); !s) return Fail(s.error());
  return t;
}

}  // namespace berth::workspace
