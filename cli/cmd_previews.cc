// Preview links (docs/api.md, "Previews"): `berth preview WS PORT` makes one and prints the link
// alone on stdout, so that `open "$(berth preview ws 5173)"` works; `berth previews WS` lists a
// workspace's previews and revokes them.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "common/duration.h"
#include "common/v1/time.h"

namespace berth::cli {
namespace {

constexpr std::chrono::seconds kCallTimeout{120};

struct PreviewOptions {
  std::string workspace;
  int port = 0;
  bool is_public = false;
  std::string expires;  // a duration ("2h"); empty: berthd's default
};

struct PreviewsOptions {
  std::string workspace;
  std::vector<std::string> revoke;  // preview ids
};

Result<int> CreatePreview(Context& ctx, const PreviewOptions& o) {
  v1::CreatePreview request;
  request.port = static_cast<uint16_t>(o.port);  // CLI11 checked 1-65535
  request.is_public = o.is_public;
  if (!o.expires.empty()) {
    auto expires = ParseDuration(o.expires);
    if (!expires) return Fail(ErrorCode::kInvalidArgument, "--expires: " + expires.error().message);
    if (expires->count() <= 0) return Fail(ErrorCode::kInvalidArgument, "--expires must be positive");
    request.expires_in_s = expires->count();
  }
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto preview = berth->CreatePreview(o.workspace, request, DeadlineIn(kCallTimeout));
  if (!preview) return Fail(preview.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*preview));
    return kExitOk;
  }
  // The link alone on stdout (the token is in it for a private preview: berthd shows it only
  // now); what it is for people on stderr.
  ctx.out() << preview->link.value_or(preview->url) << "\n";
  ctx.out().flush();
  ctx.Note(fmt::format("{} preview {} of port {} in {}, until {}; revoke it with: berth previews "
                       "{} --revoke {}",
                       preview->is_public ? "public" : "private", preview->id, preview->port,
                       o.workspace, v1::FormatTime(preview->expires_at), o.workspace,
                       preview->id));
  return kExitOk;
}

Result<int> Revoke(Context& ctx, const client::BerthClient& berth, const PreviewsOptions& o) {
  int code = kExitOk;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& id : o.revoke) {
    auto done = berth.RevokePreview(o.workspace, id, DeadlineIn(kCallTimeout));
    if (!done) {
      code = ctx.Report(Error{done.error().code, fmt::format("{}: {}", id, done.error().message)});
      continue;
    }
    if (ctx.json()) {
      out.push_back(v1::ToJson(*done));
    } else {
      ctx.out() << id << ": revoked\n";
    }
  }
  if (ctx.json()) ctx.PrintJson(out);
  return code;
}

Result<int> Previews(Context& ctx, const PreviewsOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  if (!o.revoke.empty()) return Revoke(ctx, *berth, o);
  auto previews = berth->ListPreviews(o.workspace, DeadlineIn(kCallTimeout));
  if (!previews) return Fail(previews.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::PreviewListJson(*previews));
    return kExitOk;
  }
  Table table({"ID", "PORT", "PUBLIC", "STATUS", "EXPIRES", "LAST USED", "URL"});
  for (const auto& p : *previews) {
    table.AddRow({p.id, std::to_string(p.port), p.is_public ? "yes" : "no", p.status,
                  v1::FormatTime(p.expires_at),
                  p.last_used_at ? FormatAge(*p.last_used_at, ctx.now()) + " ago" : "-", p.url});
  }
  ctx.out() << table.Render();
  return kExitOk;
}

}  // namespace

void AddPreviewCommands(Builder& b) {
  auto p = std::make_shared<PreviewOptions>();
  auto* preview = b.Add("preview", "make a preview link to a port in a workspace and print it",
                        [p](Context& ctx) { return CreatePreview(ctx, *p); });
  preview->add_option("workspace", p->workspace, "workspace id or name")->required();
  preview->add_option("port", p->port, "the port in the workspace")->required()
      ->check(CLI::Range(1, 65535));
  preview->add_flag("--public", p->is_public,
                    "anyone with the URL may open it (default: private, a link with a token)");
  preview->add_option("--expires", p->expires,
                      "how long it lasts, e.g. 30m, 2h, 7d (default: berthd's, 24h)");
  b.AddJsonFlag(preview);

  auto l = std::make_shared<PreviewsOptions>();
  auto* previews = b.Add("previews", "list a workspace's preview links, or revoke them",
                         [l](Context& ctx) { return Previews(ctx, *l); });
  previews->add_option("workspace", l->workspace, "workspace id or name")->required();
  previews->add_option("--revoke", l->revoke, "revoke these previews (ids); they stop at once")
      ->expected(1, -1);
  b.AddJsonFlag(previews);
}

}  // namespace berth::cli
