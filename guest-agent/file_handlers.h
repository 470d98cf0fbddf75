// The files API's handlers, one file per concern (file_routes.cc registers and dispatches,
// file_transfer.cc streams contents both ways, file_tar.cc directory archives, file_watch.cc
// inotify streams). Every handler answers the exchange itself.
#pragma once

#include <optional>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "common/blocking.h"
#include "common/http/server.h"
#include "guest-agent/api_context.h"
#include "guest-agent/users.h"

namespace berth::agent::files {

// What every files request resolves first.
struct FileRequest {
  FileRequest() = default;
  std::string path;  // absolute, normalised
  UserInfo user;     // ?user=, else the agent's default user
};

// Runs `fn` (returning a Result or Status) on the blocking pool with `user`'s fs credentials.
// `user` and whatever `fn` references must outlive the call (the caller awaits it).
template <class F>
auto RunAs(ApiContext& ctx, const UserInfo& user, F fn) -> http::Task<std::invoke_result_t<F>> {
  using R = std::invoke_result_t<F>;
  auto job = [&user, fn = std::move(fn)]() mutable -> R {
    ScopedFsCredentials creds(user);
    if (!creds.ok()) {
      return Fail(ErrorCode::kInternal, fmt::format("cannot switch to user {}", user.name));
    }
    return fn();
  };
  co_return co_await RunBlocking(ctx.blocking, std::move(job));
}

// Pieces of file contents and archives move in chunks of this size: large enough to keep
// syscalls and thread hops rare, small enough that a transfer holds little memory.
inline constexpr size_t kChunkBytes = 256 * 1024;
// After a failed upload the rest of the body is read and dropped up to this much, so that the
// client (which is still sending) gets to read the error instead of a reset connection.
inline constexpr uint64_t kDrainBytes = 8u << 20;

http::Task<void> GetContent(http::Exchange& ex, ApiContext& ctx, const FileRequest& req);
http::Task<void> PutContent(http::Exchange& ex, ApiContext& ctx, const FileRequest& req);
http::Task<void> GetTar(http::Exchange& ex, ApiContext& ctx, const FileRequest& req);
http::Task<void> PutTar(http::Exchange& ex, ApiContext& ctx, const FileRequest& req);
http::Task<void> Watch(http::Exchange& ex, ApiContext& ctx, const FileRequest& req);

}  // namespace berth::agent::files
