#include "common/v1/preview.h"

#include "common/duration.h"
#include "common/v1/reader.h"
#include "common/v1/time.h"

namespace berth::v1 {

using nlohmann::json;

namespace {

constexpr size_t kMaxPreviews = 10000;
constexpr size_t kMaxUrlBytes = 2048;

void ReadPreviewFields(Reader& r, Preview& p) {
  r.String("id", p.id)
      .String("workspace_id", p.workspace_id)
      .Integer("port", p.port, 1, 65535)
      .Bool("public", p.is_public)
      .String("status", p.status)
      .String("url", p.url, kMaxUrlBytes)
      .OptString("token", p.token)
      .OptString("link", p.link, kMaxUrlBytes)
      .Time("created_at", p.created_at)
      .Time("expires_at", p.expires_at)
      .OptTime("last_used_at", p.last_used_at)
      .OptTime("revoked_at", p.revoked_at);
}

}  // namespace

json ToJson(const CreatePreview& c) {
  json j = json::object();
  j["port"] = c.port;
  j["public"] = c.is_public;
  if (c.expires_in_s) j["expires_in"] = *c.expires_in_s;
  return j;
}

Result<CreatePreview> CreatePreviewFromJson(const json& j) {
  CreatePreview c;
  Reader r(j, "preview");
  r.OnlyFields({"port", "public", "expires_in"}).Integer("port", c.port, 1, 65535);
  std::optional<bool> is_public;
  r.OptBool("public", is_public);
  c.is_public = is_public.value_or(false);
  if (const json* e = r.Find("expires_in")) {
    if (e->is_string()) {
      auto d = ParseDuration(e->get<std::string>());
      if (!d) {
        r.Problem("preview: 'expires_in' must be seconds or a duration such as \"2h\"");
      } else {
        c.expires_in_s = d->count();
      }
    } else {
      std::optional<int64_t> s;
      r.OptInteger("expires_in", s, 1, int64_t{10} * 365 * 24 * 3600);
      c.expires_in_s = s;
    }
  }
  if (auto done = r.Done(); !done) return Fail(done.error());
  return c;
}

json ToJson(const Preview& p) {
  json j = json::object();
  j["id"] = p.id;
  j["workspace_id"] = p.workspace_id;
  j["port"] = p.port;
  j["public"] = p.is_public;
  j["status"] = p.status;
  j["url"] = p.url;
  if (p.token) j["token"] = *p.token;
  if (p.link) j["link"] = *p.link;
  j["created_at"] = FormatTime(p.created_at);
  j["expires_at"] = FormatTime(p.expires_at);
  j["last_used_at"] = TimeOrNull(p.last_used_at);
  j["revoked_at"] = TimeOrNull(p.revoked_at);
  return j;
}

Result<Preview> PreviewFromJson(const json& j) {
  Preview p;
  Reader r(j, "preview");
  ReadPreviewFields(r, p);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return p;
}

json PreviewListJson(const std::vector<Preview>& previews) {
  json list = json::array();
  for (const auto& p : previews) list.push_back(ToJson(p));
  json j = json::object();
  j["previews"] = std::move(list);
  return j;
}

Result<std::vector<Preview>> PreviewListFromJson(const json& j) {
  std::vector<Preview> out;
  if (auto read = ReadList(j, "previews", "preview list", kMaxPreviews, PreviewFromJson, out); !read) {
    return Fail(read.error());
  }
  return out;
}

}  // namespace berth::v1
