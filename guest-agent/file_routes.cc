// /v1/files/{*path}: registration, request preparation (path, user) and the small operations
// (stat, delete, mkdir, move). Streaming lives in file_transfer.cc, file_tar.cc, file_watch.cc.
#include <sys/stat.h>

#include <fmt/format.h>

#include "common/protocol/files.h"
#include "guest-agent/file_handlers.h"
#include "guest-agent/fs_ops.h"

namespace berth::agent {
namespace files {
namespace {

using http::bhttp::status;
using http::bhttp::verb;
using http::Exchange;
using http::Task;

// Parses {path} and ?user=. Answers the error itself and returns nullopt when invalid.
Task<std::optional<FileRequest>> Prepare(Exchange& ex, ApiContext& ctx) {
  auto path = protocol::NormalizePath(ex.param("path"));
  if (!path) {
    co_await ex.SendError(path.error());
    co_return std::nullopt;
  }
  std::string name = ex.query().Get("user").value_or(ctx.options.default_user);
  auto user = co_await RunBlocking(ctx.blocking, [&] { return ResolveUser(name); });
  if (!user) {
    Error error = user.error();
    // An unknown user is a bad argument, not a missing file.
    if (error.code == ErrorCode::kNotFound) error.code = ErrorCode::kInvalidArgument;
    co_await ex.SendError(error);
    co_return std::nullopt;
  }
  FileRequest req;
  req.path = std::move(*path);
  req.user = std::move(*user);
  co_return req;
}

Task<void> StatPath(Exchange& ex, ApiContext& ctx, const FileRequest& req) {
  auto info = co_await RunAs(ctx, req.user, [&] { return fs::Stat(req.path); });
  if (!info) {
    co_await ex.SendError(info.error());
    co_return;
  }
  nlohmann::json body = protocol::ToJson(*info);
  co_await ex.SendJson(status::ok, body);
}

Task<void> Remove(Exchange& ex, ApiContext& ctx, const FileRequest& req) {
  auto recursive = ex.query().GetBool("recursive", false);
  if (!recursive) {
    co_await ex.SendError(recursive.error());
    co_return;
  }
  auto removed =
      co_await RunAs(ctx, req.user, [&] { return fs::Remove(req.path, *recursive); });
  if (!removed) {
    co_await ex.SendError(removed.error());
    co_return;
  }
  nlohmann::json body = {{"path", req.path}, {"deleted", true}};
  co_await ex.SendJson(status::ok, body);
}

Result<std::optional<mode_t>> ModeParam(const Exchange& ex) {
  auto text = ex.query().Get("mode");
  if (!text) return std::optional<mode_t>();
  auto mode = protocol::ParseMode(*text);
  if (!mode) return Fail(mode.error());
  return std::optional<mode_t>(static_cast<mode_t>(*mode));
}

Task<void> MakeDir(Exchange& ex, ApiContext& ctx, const FileRequest& req) {
  auto parents = ex.query().GetBool("parents", false);
  auto mode = ModeParam(ex);
  if (!parents || !mode) {
    Error error = !parents ? parents.error() : mode.error();
    co_await ex.SendError(error);
    co_return;
  }
  mode_t m = mode->value_or(0755);
  auto made = co_await RunAs(ctx, req.user,
                             [&]() -> Result<std::pair<bool, protocol::FileInfo>> {
                               auto created = fs::MakeDir(req.path, *parents, m);
                               if (!created) return Fail(created.error());
                               auto info = fs::Stat(req.path);
                               if (!info) return Fail(info.error());
                               return std::make_pair(*created, std::move(*info));
                             });
  if (!made) {
    co_await ex.SendError(made.error());
    co_return;
  }
  nlohmann::json body = protocol::ToJson(made->second);
  const auto code = made->first ? status::created : status::ok;
  co_await ex.SendJson(code, body);
}

Task<void> Move(Exchange& ex, ApiContext& ctx, const FileRequest& req) {
  auto to_text = ex.query().Get("to");
  auto overwrite = ex.query().GetBool("overwrite", false);
  if (!to_text || !overwrite) {
    Error error = !overwrite ? overwrite.error()
                             : Error(ErrorCode::kInvalidArgument, "op=move needs to=/destination/path");
    co_await ex.SendError(error);
    co_return;
  }
  auto to = protocol::NormalizePath(*to_text);
  if (!to) {
    co_await ex.SendError(to.error());
    co_return;
  }
  auto moved = co_await RunAs(ctx, req.user, [&]() -> Result<protocol::FileInfo> {
    if (auto status = fs::Move(req.path, *to, *overwrite); !status) return Fail(status.error());
    return fs::Stat(*to);
  });
  if (!moved) {
    co_await ex.SendError(moved.error());
    co_return;
  }
  nlohmann::json body = protocol::ToJson(*moved);
  co_await ex.SendJson(status::ok, body);
}

Task<void> HandleGet(Exchange& ex, ApiContext& ctx) {
  auto req = co_await Prepare(ex, ctx);
  if (!req) co_return;
  const auto& q = ex.query();
  auto stat = q.GetBool("stat", false);
  auto watch = q.GetBool("watch", false);
  if (!stat || !watch) {
    Error error = !stat ? stat.error() : watch.error();
    co_await ex.SendError(error);
    co_return;
  }
  if (*stat) co_return co_await StatPath(ex, ctx, *req);
  if (auto archive = q.Get("archive")) {
    if (*archive != "tar") {
      co_await ex.SendError({ErrorCode::kInvalidArgument, "archive must be 'tar'"});
      co_return;
    }
    co_return co_await GetTar(ex, ctx, *req);
  }
  if (*watch) co_return co_await Watch(ex, ctx, *req);
  co_await GetContent(ex, ctx, *req);
}

Task<void> HandlePut(Exchange& ex, ApiContext& ctx) {
  auto req = co_await Prepare(ex, ctx);
  if (!req) co_return;
  auto archive = ex.query().Get("archive");
  if (archive && *archive != "tar") {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "archive must be 'tar'"});
    co_return;
  }
  bool tar_type = http::beast::iequals(ex.header(http::bhttp::field::content_type),
                                       "application/x-tar");
  if (archive || tar_type) co_return co_await PutTar(ex, ctx, *req);
  co_await PutContent(ex, ctx, *req);
}

Task<void> HandleDelete(Exchange& ex, ApiContext& ctx) {
  auto req = co_await Prepare(ex, ctx);
  if (!req) co_return;
  co_await Remove(ex, ctx, *req);
}

Task<void> HandlePost(Exchange& ex, ApiContext& ctx) {
  auto req = co_await Prepare(ex, ctx);
  if (!req) co_return;
  auto op = ex.query().Get("op").value_or("");
  if (op == "mkdir") co_return co_await MakeDir(ex, ctx, *req);
  if (op == "move") co_return co_await Move(ex, ctx, *req);
  co_await ex.SendError(
      {ErrorCode::kInvalidArgument, fmt::format("op must be mkdir or move, not '{}'", op)});
}

}  // namespace
}  // namespace files

void AddFileRoutes(http::Router& router, ApiContext& ctx) {
  // `ctx` is a temporary of the Agent's constructor (its members are references to the
  // Agent's own parts): keep a copy alive with the routes.
  auto s = std::make_shared<ApiContext>(ctx);
  router.Add(http::bhttp::verb::get, "/v1/files/{*path}",
             [s](http::Exchange& ex) { return files::HandleGet(ex, *s); });
  router.Add(http::bhttp::verb::put, "/v1/files/{*path}",
             [s](http::Exchange& ex) { return files::HandlePut(ex, *s); });
  router.Add(http::bhttp::verb::delete_, "/v1/files/{*path}",
             [s](http::Exchange& ex) { return files::HandleDelete(ex, *s); });
  router.Add(http::bhttp::verb::post, "/v1/files/{*path}",
             [s](http::Exchange& ex) { return files::HandlePost(ex, *s); });
}

}  // namespace berth::agent
