// Berth's error type: a code in the gRPC/Abseil style plus a human-readable message, carried in
// std::expected. One table (HttpStatus) maps codes to HTTP statuses for every server in Berth.
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace berth {

enum class ErrorCode {
  kInvalidArgument,     // 400: the caller sent something malformed or out of range
  kUnauthenticated,     // 401: no or wrong credentials
  kPermissionDenied,    // 403: authenticated, but not allowed
  kNotFound,            // 404
  kMethodNotAllowed,    // 405
  kAlreadyExists,       // 409
  kFailedPrecondition,  // 409: the target is not in a state that allows the operation
  kTooLarge,            // 413: a body or field over its limit
  kResourceExhausted,   // 429: a quota, a connection cap, a rate limit
  kInternal,            // 500: a broken invariant or an unexpected failure
  kUnavailable,         // 503: try again later (a VM booting, a daemon down)
  kDeadlineExceeded,    // 504
  kNoSpace,             // 507: the disk is full
  // 429: a tenant's limit (workspaces, vCPUs, memory, disk) would be passed. Not
  // resource_exhausted: nothing clears by itself, so no Retry-After; the tenant frees some of
  // its use (stops or deletes a workspace) or the operator raises the limit.
  kQuotaExceeded,
  // 507: the host is short of disk (berthd's data directory below its minimum free), so it
  // refuses to make disks. Not no_space, which is a guest's own disk being full.
  kInsufficientStorage,
  // 423: a person holds the workspace's desktop (controller/desktop/control.h): the agent's
  // input is refused until they hand back; details say who holds it and since when.
  kLocked,
};

// Not an aggregate on purpose: g++ 12 destroys an aggregate temporary twice when it is built
// inside a co_await expression (`co_await SendError({code, "..."})`); a constructor avoids it.
struct [[nodiscard]] Error {
  Error() = default;
  Error(ErrorCode c, std::string m) : code(c), message(std::move(m)) {}
  Error(ErrorCode c, std::string m, std::string d)
      : code(c), message(std::move(m)), details(std::move(d)) {}
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  // A JSON object (as text) sent as the error body's "details" when not empty, for a caller
  // that acts on the numbers (quota_exceeded: {limit, allowed, in_use, requested}). Text, so
  // that this header needs no JSON library.
  std::string details;
};

// std::expected with [[nodiscard]] on the type: every function that returns a Result or a
// Status warns (an error with -Werror) when its result is dropped. A result that may be dropped
// is discarded on purpose with `(void)` and a comment saying why.
template <class T>
class [[nodiscard]] Result : public std::expected<T, Error> {
 public:
  using Base = std::expected<T, Error>;
  using Base::Base;
  Result() = default;
  Result(const Base& other) : Base(other) {}
  Result(Base&& other) : Base(std::move(other)) {}
};
using Status = Result<void>;

inline std::unexpected<Error> Fail(ErrorCode code, std::string message) {
  return std::unexpected(Error{code, std::move(message)});
}
inline std::unexpected<Error> Fail(Error error) { return std::unexpected(std::move(error)); }

// HTTP status for a code; the only such table in Berth.
int HttpStatus(ErrorCode code);
// The wire name ("not_found") and back.
std::string_view ErrorCodeName(ErrorCode code);
std::optional<ErrorCode> ErrorCodeFromName(std::string_view name);
// The closest code for an HTTP status from a peer that did not send a Berth error body.
ErrorCode ErrorCodeForHttpStatus(int status);

// An errno turned into an Error: ENOENT not_found, EACCES/EPERM permission_denied, EEXIST
// already_exists, ENOSPC/EDQUOT no_space, ENAMETOOLONG/EINVAL/ELOOP/ENOTDIR/EISDIR
// invalid_argument or failed_precondition, the rest internal. `what` names the operation
// and its object, e.g. "open /etc/x".
Error ErrnoError(int err, std::string_view what);

}  // namespace berth
