#include "controller/preview/preview_service.h"

#include <fmt/format.h>

#include "controller/preview/preview_host.h"
#include "controller/preview/preview_request.h"

namespace berth::preview {

PreviewService::PreviewService(PreviewConfig config, store::Store& store, std::function<int64_t()> now)
    : config_(std::move(config)), store_(store), grants_(store, std::move(now)) {}

std::optional<std::string> PreviewService::Url(uint16_t port, std::string_view workspace) const {
  auto label = PreviewLabel(port, workspace);
  if (!label) return std::nullopt;
  return UrlOfLabel(*label);
}

std::string PreviewService::UrlPattern() const { return UrlOfLabel("{port}-{workspace}"); }

std::string PreviewService::UrlOfLabel(std::string_view label) const {
  const std::string scheme = config_.LinkScheme();
  int url_port = config_.url_port != 0 ? config_.url_port : listener_port_.load();
  bool default_port = url_port == 0 || (scheme == "http" && url_port == 80) ||
                      (scheme == "https" && url_port == 443);
  return fmt::format("{}://{}.{}{}/", scheme, label, config_.domain,
                     default_port ? "" : fmt::format(":{}", url_port));
}

std::string PreviewService::UrlOf(uint16_t port, const workspace::Workspace& ws) const {
  return Url(port, ws.name).value_or(Url(port, ws.id).value_or(""));
}

v1::Preview PreviewService::Present(const store::Preview& p, const workspace::Workspace& ws) const {
  v1::Preview out;
  out.id = p.id;
  out.workspace_id = p.workspace_id;
  out.port = static_cast<uint16_t>(p.port);
  out.is_public = p.is_public;
  int64_t now = grants_.Now();
  out.status = p.revoked_at ? "revoked" : p.expires_at <= now ? "expired" : "active";
  out.url = UrlOf(out.port, ws);
  out.created_at = p.created_at;
  out.expires_at = p.expires_at;
  out.last_used_at = p.last_used_at;
  out.revoked_at = p.revoked_at;
  return out;
}

Result<v1::Preview> PreviewService::Create(const workspace::Workspace& ws, const v1::CreatePreview& request,
                                           const std::string& key_id) {
  auto ttl = request.expires_in_s ? std::chrono::seconds(*request.expires_in_s) : config_.default_ttl;
  if (ttl > config_.max_ttl || ttl.count() < 60) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("'expires_in' must be between 60 s and {} s (this berthd's preview.max_ttl)",
                            config_.max_ttl.count()));
  }
  auto made = grants_.Create(ws.tenant_id, ws.id, request.port, request.is_public, ttl, key_id);
  if (!made) return Fail(made.error());
  auto out = Present(made->record, ws);
  if (!made->token.empty()) {
    out.token = made->token;
    out.link = fmt::format("{}?{}={}", out.url, kTokenParam, made->token);
  }
  return out;
}

Result<std::vector<v1::Preview>> PreviewService::List(const workspace::Workspace& ws) {
  auto rows = store_.ListPreviews(ws.tenant_id, ws.id);
  if (!rows) return Fail(rows.error());
  std::vector<v1::Preview> out;
  for (const auto& p : *rows) out.push_back(Present(p, ws));
  return out;
}

Result<v1::Preview> PreviewService::Revoke(const workspace::Workspace& ws, const std::string& id) {
  if (auto s = grants_.Revoke(ws.tenant_id, ws.id, id); !s) return Fail(s.error());
  auto row = store_.GetPreview(ws.tenant_id, ws.id, id);
  if (!row) return Fail(row.error());
  return Present(*row, ws);
}

}  // namespace berth::preview
