// Previews as the API, the CLI (through it) and MCP see them: create, list and revoke grants
// (preview_grants.h) of a workspace's ports, as v1::Preview records with their links. One per
// berthd, shared by the routes (controller/api/preview_routes.cc), MCP's in-process backend and
// the gateway (the links it puts on its pages). Thread-safe; Create, List and Revoke block (the
// store): call them off I/O threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/v1/preview.h"
#include "controller/preview/preview_config.h"
#include "controller/preview/preview_grants.h"
#include "controller/store/store.h"
#include "controller/workspace/workspace.h"

namespace berth::preview {

class PreviewService {
 public:
  // `now`: Unix seconds.
  PreviewService(PreviewConfig config, store::Store& store, std::function<int64_t()> now);

  // A new grant of a port of `ws` (which the caller looked up for its tenant). invalid_argument
  // when the duration is out of the config's bounds. The record carries the token and the link
  // for a private preview: the only time they are shown.
  Result<v1::Preview> Create(const workspace::Workspace& ws, const v1::CreatePreview& request,
                             const std::string& key_id);
  // The workspace's grants, newest first, expired and revoked ones included.
  Result<std::vector<v1::Preview>> List(const workspace::Workspace& ws);
  // not_found when there is no such grant or it is revoked already.
  Result<v1::Preview> Revoke(const workspace::Workspace& ws, const std::string& id);

  // The address of a port of a workspace (its id or name), or nullopt when it has none (a name
  // too long for a DNS label). Any thread.
  std::optional<std::string> Url(uint16_t port, std::string_view workspace) const;
  // The address of a port of `ws`: by name, by id when the name has no preview host.
  std::string UrlOf(uint16_t port, const workspace::Workspace& ws) const;
  // Every preview's address at once, "{port}" and "{workspace}" in place of a port and a
  // workspace (berthd's start-up line). Any thread.
  std::string UrlPattern() const;
  // The port links name when the config does not say (the listener that serves previews).
  void SetListenerPort(uint16_t port) { listener_port_.store(port); }

  const PreviewConfig& config() const { return config_; }
  PreviewGrants& grants() { return grants_; }

 private:
  // The link to the preview host labelled `label`: the config's scheme, domain and port.
  std::string UrlOfLabel(std::string_view label) const;
  v1::Preview Present(const store::Preview& p, const workspace::Workspace& ws) const;

  PreviewConfig config_;
  store::Store& store_;
  PreviewGrants grants_;
  std::atomic<uint16_t> listener_port_{0};
};

}  // namespace berth::preview
