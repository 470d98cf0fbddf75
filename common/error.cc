#include "common/error.h"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <utility>

namespace berth {
namespace {

struct CodeInfo {
  ErrorCode code;
  std::string_view name;
  int status;
};

constexpr CodeInfo kCodes[] = {
    {ErrorCode::kInvalidArgument, "invalid_argument", 400},
    {ErrorCode::kUnauthenticated, "unauthenticated", 401},
    {ErrorCode::kPermissionDenied, "permission_denied", 403},
    {ErrorCode::kNotFound, "not_found", 404},
    {ErrorCode::kMethodNotAllowed, "method_not_allowed", 405},
    {ErrorCode::kAlreadyExists, "already_exists", 409},
    {ErrorCode::kFailedPrecondition, "failed_precondition", 409},
    {ErrorCode::kTooLarge, "too_large", 413},
    {ErrorCode::kResourceExhausted, "resource_exhausted", 429},
    {ErrorCode::kInternal, "internal", 500},
    {ErrorCode::kUnavailable, "unavailable", 503},
    {ErrorCode::kDeadlineExceeded, "deadline_exceeded", 504},
    {ErrorCode::kNoSpace, "no_space", 507},
    // After resource_exhausted and no_space: a bare 429 or 507 from a peer reads as those.
    {ErrorCode::kQuotaExceeded, "quota_exceeded", 429},
    {ErrorCode::kInsufficientStorage, "insufficient_storage", 507},
    {ErrorCode::kLocked, "locked", 423},
};

const CodeInfo& Info(ErrorCode code) {
  for (const auto& info : kCodes) {
    if (info.code == code) return info;
  }
  std::unreachable();
}

}  // namespace

int HttpStatus(ErrorCode code) { return Info(code).status; }

std::string_view ErrorCodeName(ErrorCode code) { return Info(code).name; }

std::optional<ErrorCode> ErrorCodeFromName(std::string_view name) {
  for (const auto& info : kCodes) {
    if (info.name == name) return info.code;
  }
  return std::nullopt;
}

ErrorCode ErrorCodeForHttpStatus(int status) {
  // First match wins: 409 reads as already_exists, which is the safer word for a retry.
  for (const auto& info : kCodes) {
    if (info.status == status) return info.code;
  }
  if (status >= 500) return ErrorCode::kInternal;
  return ErrorCode::kInvalidArgument;
}

Error ErrnoError(int err, std::string_view what) {
  ErrorCode code = ErrorCode::kInternal;
  switch (err) {
    case ENOENT: code = ErrorCode::kNotFound; break;
    case EACCES:
    case EPERM:
    case EROFS: code = ErrorCode::kPermissionDenied; break;
    case EEXIST:
    case ENOTEMPTY: code = ErrorCode::kAlreadyExists; break;
    case ENOSPC:
    case EDQUOT: code = ErrorCode::kNoSpace; break;
    case ENAMETOOLONG:
    case EINVAL:
    case ELOOP:
    case EXDEV: code = ErrorCode::kInvalidArgument; break;
    case ENOTDIR:
    case EISDIR:
    case EBUSY:
    case ETXTBSY: code = ErrorCode::kFailedPrecondition; break;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EAGAIN: code = ErrorCode::kResourceExhausted; break;
    case ETIMEDOUT: code = ErrorCode::kDeadlineExceeded; break;
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENETUNREACH: code = ErrorCode::kUnavailable; break;
    default: break;
  }
  return Error{code, fmt::format("{}: {}", what, std::strerror(err))};
}

}  // namespace berth
