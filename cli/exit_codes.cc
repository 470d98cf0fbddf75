#include "cli/exit_codes.h"

namespace berth::cli {

int ExitCodeFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return kExitUsage;
    case ErrorCode::kNotFound: return kExitNotFound;
    case ErrorCode::kUnauthenticated:
    case ErrorCode::kPermissionDenied: return kExitAuth;
    case ErrorCode::kUnavailable: return kExitUnreachable;
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kLocked: return kExitConflict;
    case ErrorCode::kDeadlineExceeded: return kExitTimeout;
    case ErrorCode::kMethodNotAllowed:
    case ErrorCode::kTooLarge:
    case ErrorCode::kResourceExhausted:
    case ErrorCode::kQuotaExceeded:
    case ErrorCode::kInsufficientStorage:
    case ErrorCode::kInternal:
    case ErrorCode::kNoSpace: return kExitError;
  }
  return kExitError;
}

int ExitCodeFor(const protocol::ExitStatus& status) {
  if (status.exit_code) return *status.exit_code;
  if (status.signal) {
    auto signo = protocol::SignalFromName(*status.signal);
    if (signo) return 128 + *signo;
  }
  // Neither an exit code nor a known signal: the end event was incomplete.
  return kExitError;
}

}  // namespace berth::cli
