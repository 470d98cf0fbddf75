// The exit codes of `berth`, which scripts rely on (README, "The CLI"). One table from Berth's
// error codes to them; `berth exec` and `berth shell` exit with the remote command's status.
#pragma once

#include "common/error.h"
#include "common/protocol/exec.h"

namespace berth::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,        // anything not below (a server error, a local I/O failure)
  kExitUsage = 2,        // bad flags or arguments (also a server's invalid_argument)
  kExitNotFound = 3,     // no such workspace, key, tenant, file
  kExitAuth = 4,         // no API key, a wrong or revoked key, or a key without the scope
  kExitUnreachable = 5,  // berthd (or the workspace's agent behind it) cannot be reached
  kExitConflict = 6,     // already exists, or the workspace is in the wrong state
  kExitTimeout = 7,      // a wait or a call ran out of time
};

// The exit code for an error.
int ExitCodeFor(ErrorCode code);

// The exit code a shell would report for a finished remote command: its exit status, or 128 + N
// when killed by signal N.
int ExitCodeFor(const protocol::ExitStatus& status);

}  // namespace berth::cli
