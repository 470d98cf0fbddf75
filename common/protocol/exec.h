// The exec and process protocol shared by berth-agent, berthd and the client library: request
// and response types with their JSON forms, stream events, signal names and the UTF-8/base64
// rule for output data.
//
// Wire shapes (the agent's API; berthd mirrors them under /v1/workspaces/{id}):
//   POST /v1/exec            ExecRequest → ExecResult (wait), NDJSON ExecEvents
//                            (Accept: application/x-ndjson) or 202 {pid, tag} (background)
//   GET  /v1/exec/ws         WebSocket; first text frame SessionStart, or ?attach=PID_OR_TAG
//   GET  /v1/processes[/{id}[/output]]  ProcessInfo / NDJSON ExecEvents
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::protocol {

// Default cap on captured output per stream in wait mode, and the largest a caller may ask for.
inline constexpr uint64_t kDefaultMaxOutputBytes = 1u << 20;
inline constexpr uint64_t kMaxMaxOutputBytes = 64u << 20;
// Tags name processes in URLs; bounded so that they stay readable and cheap to compare.
inline constexpr size_t kMaxTagLength = 128;

// A command: a string run by `/bin/sh -c`, or an argv run by execvp (PATH lookup).
using Command = std::variant<std::string, std::vector<std::string>>;

// Parses and validates a `cmd` value: a non-empty string or a non-empty array of strings.
Result<Command> CommandFromJson(const nlohmann::json& value);
nlohmann::json CommandToJson(const Command& cmd);
// The argv actually executed ({"/bin/sh", "-c", s} for a string).
std::vector<std::string> CommandArgv(const Command& cmd);

// Validates a tag: 1..kMaxTagLength printable characters without '/', not all digits (a number
// would be taken for a pid).
Status ValidateTag(std::string_view tag);

// Environment given by the caller: a null value removes a variable from the base environment.
using EnvOverrides = std::map<std::string, std::optional<std::string>>;

// Request header on POST /v1/exec and GET /v1/exec/ws: environment that applies under the
// request's own `env` (the request's variables win). berthd sends a workspace's `env` in it,
// so the workspace env reaches interactive sessions as well as execs. The value is a JSON
// object of strings, written as ASCII (non-ASCII characters as \u escapes).
inline constexpr std::string_view kDefaultEnvHeader = "Berth-Env";
// The header's value for `env`, a JSON object of variable names to strings.
std::string EnvHeaderValue(const nlohmann::json& env);
// Parses the header's value (empty: no variables) and puts each variable into `env` unless
// `env` already has it.
Status ApplyEnvHeader(std::string_view value, EnvOverrides& env);

// The agent's answer to an exec in wait mode says how it ended in this header too, so that
// berthd's timeline need not read the body: "0", "137 KILL", "137 KILL timed_out" (the exit
// code, the signal's name when a signal ended it, and whether its timeout did). Absent when the
// exit is unknown.
inline constexpr std::string_view kExitHeader = "Berth-Exit";

struct ExecRequest {
  ExecRequest() = default;
  Command cmd;
  EnvOverrides env;
  std::optional<std::string> cwd;   // default: the user's home, or / when it is missing
  std::optional<std::string> user;  // default: the agent's default user
  std::optional<std::string> stdin_data;  // written to the process, then stdin is closed
  std::optional<uint64_t> timeout_ms;     // kill the process group after this
  std::optional<std::string> tag;
  bool background = false;
  std::optional<uint64_t> max_output_bytes;  // per stream, wait mode

  nlohmann::json ToJson() const;
  static Result<ExecRequest> FromJson(const nlohmann::json& json);
};

// How a process ended. `exit_code` is the exit status, or 128 + N when killed by signal N
// (as shells report it); `signal` is then the signal's name without "SIG" ("KILL").
struct ExitStatus {
  ExitStatus() = default;
  std::optional<int> exit_code;
  std::optional<std::string> signal;
  uint64_t duration_ms = 0;
  bool timed_out = false;
};
// kExitHeader's value for `exit`; empty when it has no exit code.
std::string ExitHeaderValue(const ExitStatus& exit);
// Parses it back: nullopt for anything malformed (the header comes from the guest).
std::optional<ExitStatus> ParseExitHeader(std::string_view value);


// The answer of a wait-mode exec.
struct ExecResult {
  ExecResult() = default;
  int pid = 0;
  std::optional<std::string> tag;
  ExitStatus exit;
  std::string stdout_data;
  std::string stderr_data;
  bool truncated = false;

  nlohmann::json ToJson() const;
  static Result<ExecResult> FromJson(const nlohmann::json& json);
};

// One NDJSON line of an exec stream or a process output stream.
struct ExecEvent {
  enum class Type { kStart, kStdout, kStderr, kKeepalive, kEnd, kAttached, kError };
  ExecEvent() = default;
  explicit ExecEvent(Type t) : type(t) {}
  Type type = Type::kKeepalive;
  int pid = 0;                     // start
  std::optional<std::string> tag;  // start
  std::string data;                // stdout/stderr: the bytes (decoded from data or data_b64)
  std::optional<uint64_t> offset;  // stdout/stderr: absolute offset of data in its stream
  ExitStatus exit;                 // end
  std::optional<Error> error;      // error

  // The JSON line without the trailing newline. Output data goes in "data" when it is valid
  // UTF-8 and in "data_b64" (base64) otherwise.
  std::string ToLine() const;
  static Result<ExecEvent> FromJson(const nlohmann::json& json);
};

// Session start message (first text frame on /v1/exec/ws).
struct PtySize {
  PtySize() = default;
  PtySize(uint16_t c, uint16_t r) : cols(c), rows(r) {}
  uint16_t cols = 80;
  uint16_t rows = 24;
};

struct SessionStart {
  SessionStart() = default;
  std::optional<Command> cmd;  // default: the user's login shell
  EnvOverrides env;
  std::optional<std::string> cwd;
  std::optional<std::string> user;
  std::optional<std::string> tag;
  std::optional<PtySize> pty;  // absent: pipes

  nlohmann::json ToJson() const;
  static Result<SessionStart> FromJson(const nlohmann::json& json);
};

// A process as the process table reports it.
struct ProcessInfo {
  ProcessInfo() = default;
  int pid = 0;
  std::optional<std::string> tag;
  nlohmann::json cmd;  // as given: a string or an array
  std::string user;
  bool pty = false;
  bool running = false;  // "status": "running" | "exited"
  ExitStatus exit;       // meaningful once exited
  std::string started_at;
  std::optional<std::string> ended_at;
  uint64_t stdout_bytes = 0;  // total produced so far (the next offset)
  uint64_t stderr_bytes = 0;

  nlohmann::json ToJson() const;
  static Result<ProcessInfo> FromJson(const nlohmann::json& json);
};

// "TERM", "SIGTERM", "term" or "15" → 15. invalid_argument for anything else.
Result<int> SignalFromName(std::string_view name);
// 15 → "TERM"; an unknown number → its decimal form.
std::string SignalName(int signo);

// The length of the longest prefix of `data` that does not end inside a UTF-8 sequence (at
// most 3 trailing bytes are held back; bytes that can never complete are not).
size_t CompleteUtf8Prefix(std::string_view data);
bool IsValidUtf8(std::string_view data);
std::string Base64Encode(std::string_view data);
Result<std::string> Base64Decode(std::string_view text);
// Appends `data` as a JSON string literal (quotes included); `data` must be valid UTF-8.
void AppendJsonString(std::string& out, std::string_view data);

}  // namespace berth::protocol
