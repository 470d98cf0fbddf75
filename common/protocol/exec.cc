#include "common/protocol/exec.h"

#include <openssl/evp.h>
#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <type_traits>

#include <fmt/format.h>

#include "common/json.h"

namespace berth::protocol {
namespace {

using nlohmann::json;

Result<std::optional<std::string>> OptString(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return Fail(ErrorCode::kInvalidArgument, fmt::format("{} must be a string", key));
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::optional<uint64_t>> OptUint(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<uint64_t>();
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("{} must be a non-negative integer", key));
  }
  return std::optional<uint64_t>(it->get<uint64_t>());
}

// For answers read by clients, which take what they understand: j[key] when it is there
// with the type of `fallback`, otherwise `fallback` (json::value throws on a wrong type).
template <class T>
T Tolerant(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->get<bool>() : fallback;
  } else if constexpr (std::is_integral_v<T>) {
    return it->is_number_integer() ? it->get<T>() : fallback;
  } else {
    return it->is_string() ? it->get<std::string>() : fallback;
  }
}

Result<bool> OptBool(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (!it->is_boolean()) return Fail(ErrorCode::kInvalidArgument, fmt::format("{} must be a boolean", key));
  return it->get<bool>();
}

Result<EnvOverrides> EnvFromJson(const json& j) {
  EnvOverrides env;
  auto it = j.find("env");
  if (it == j.end() || it->is_null()) return env;
  if (!it->is_object()) return Fail(ErrorCode::kInvalidArgument, "env must be an object");
  for (const auto& [k, v] : it->items()) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("bad environment variable name {}", k));
    }
    if (v.is_null()) {
      env[k] = std::nullopt;
    } else if (v.is_string()) {
      if (v.get_ref<const std::string&>().find('\0') != std::string::npos) {
        return Fail(ErrorCode::kInvalidArgument, fmt::format("env {} contains a NUL byte", k));
      }
      env[k] = v.get<std::string>();
    } else {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("env {} must be a string or null", k));
    }
  }
  return env;
}

json EnvToJson(const EnvOverrides& env) {
  json out = json::object();
  for (const auto& [k, v] : env) out[k] = v ? json(*v) : json(nullptr);
  return out;
}

json OptJson(const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); }

void ExitToJson(const ExitStatus& exit, json& out) {
  out["exit_code"] = exit.exit_code ? json(*exit.exit_code) : json(nullptr);
  out["signal"] = OptJson(exit.signal);
  out["duration_ms"] = exit.duration_ms;
  out["timed_out"] = exit.timed_out;
}

ExitStatus ExitFromJson(const json& j) {
  ExitStatus exit;
  if (auto it = j.find("exit_code"); it != j.end() && it->is_number_integer()) {
    exit.exit_code = it->get<int>();
  }
  if (auto it = j.find("signal"); it != j.end() && it->is_string()) exit.signal = it->get<std::string>();
  if (auto it = j.find("duration_ms"); it != j.end() && it->is_number()) {
    exit.duration_ms = it->get<uint64_t>();
  }
  if (auto it = j.find("timed_out"); it != j.end() && it->is_boolean()) exit.timed_out = it->get<bool>();
  return exit;
}

struct SignalEntry {
  int number;
  const char* name;
};
constexpr SignalEntry kSignals[] = {
    {SIGHUP, "HUP"},   {SIGINT, "INT"},     {SIGQUIT, "QUIT"},     {SIGILL, "ILL"},
    {SIGTRAP, "TRAP"}, {SIGABRT, "ABRT"},   {SIGBUS, "BUS"},       {SIGFPE, "FPE"},
    {SIGKILL, "KILL"}, {SIGUSR1, "USR1"},   {SIGSEGV, "SEGV"},     {SIGUSR2, "USR2"},
    {SIGPIPE, "PIPE"}, {SIGALRM, "ALRM"},   {SIGTERM, "TERM"},     {SIGCHLD, "CHLD"},
    {SIGCONT, "CONT"}, {SIGSTOP, "STOP"},   {SIGTSTP, "TSTP"},     {SIGTTIN, "TTIN"},
    {SIGTTOU, "TTOU"}, {SIGURG, "URG"},     {SIGXCPU, "XCPU"},     {SIGXFSZ, "XFSZ"},
    {SIGVTALRM, "VTALRM"}, {SIGPROF, "PROF"}, {SIGWINCH, "WINCH"}, {SIGIO, "IO"},
    {SIGPWR, "PWR"},   {SIGSYS, "SYS"},
};

}  // namespace

std::string EnvHeaderValue(const json& env) {
  return DumpJson(env, -1, /*ensure_ascii=*/true);
}

Status ApplyEnvHeader(std::string_view value, EnvOverrides& env) {
  if (value.empty()) return {};
  auto parsed = ParseJson(value);
  if (!parsed || !parsed->is_object()) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("{} must be a JSON object of strings", kDefaultEnvHeader));
  }
  auto defaults = EnvFromJson(json{{"env", std::move(*parsed)}});
  if (!defaults) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("{}: {}", kDefaultEnvHeader, defaults.error().message));
  }
  env.merge(*defaults);  // keeps the request's own entries
  return {};
}

Result<Command> CommandFromJson(const json& value) {
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    if (s.empty()) return Fail(ErrorCode::kInvalidArgument, "cmd is empty");
    if (s.find('\0') != std::string::npos) {
      return Fail(ErrorCode::kInvalidArgument, "cmd contains a NUL byte");
    }
    return Command(s);
  }
  if (value.is_array()) {
    if (value.empty()) return Fail(ErrorCode::kInvalidArgument, "cmd is an empty array");
    std::vector<std::string> argv;
    for (const auto& a : value) {
      if (!a.is_string()) return Fail(ErrorCode::kInvalidArgument, "cmd array must hold only strings");
      if (a.get_ref<const std::string&>().find('\0') != std::string::npos) {
        return Fail(ErrorCode::kInvalidArgument, "cmd contains a NUL byte");
      }
      argv.push_back(a.get<std::string>());
    }
    if (argv[0].empty()) return Fail(ErrorCode::kInvalidArgument, "cmd[0] is empty");
    return Command(std::move(argv));
  }
  if (value.is_null()) return Fail(ErrorCode::kInvalidArgument, "cmd is missing");
  return Fail(ErrorCode::kInvalidArgument, "cmd must be a string or an array of strings");
}

json CommandToJson(const Command& cmd) {
  if (const auto* s = std::get_if<std::string>(&cmd)) return *s;
  return std::get<std::vector<std::string>>(cmd);
}

std::vector<std::string> CommandArgv(const Command& cmd) {
  if (const auto* s = std::get_if<std::string>(&cmd)) return {"/bin/sh", "-c", *s};
  return std::get<std::vector<std::string>>(cmd);
}

Status ValidateTag(std::string_view tag) {
  if (tag.empty() || tag.size() > kMaxTagLength) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("tag must be 1 to {} characters", kMaxTagLength));
  }
  if (std::all_of(tag.begin(), tag.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Fail(ErrorCode::kInvalidArgument, "tag must not be a number (it would read as a pid)");
  }
  for (unsigned char c : tag) {
    if (c < 0x21 || c == 0x7f || c == '/') {
      return Fail(ErrorCode::kInvalidArgument, "tag must not contain spaces, control characters or '/'");
    }
  }
  return {};
}

// --- ExecRequest ------------------------------------------------------------------------------

json ExecRequest::ToJson() const {
  json out = {{"cmd", CommandToJson(cmd)}, {"env", EnvToJson(env)}, {"background", background}};
  if (cwd) out["cwd"] = *cwd;
  if (user) out["user"] = *user;
  if (stdin_data) out["stdin"] = *stdin_data;
  if (timeout_ms) out["timeout_ms"] = *timeout_ms;
  if (tag) out["tag"] = *tag;
  if (max_output_bytes) out["max_output_bytes"] = *max_output_bytes;
  return out;
}

Result<ExecRequest> ExecRequest::FromJson(const json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "body must be a JSON object");
  ExecRequest req;
  auto cmd = CommandFromJson(j.contains("cmd") ? j["cmd"] : json(nullptr));
  if (!cmd) return Fail(cmd.error());
  req.cmd = std::move(*cmd);
  auto env = EnvFromJson(j);
  if (!env) return Fail(env.error());
  req.env = std::move(*env);
  auto cwd = OptString(j, "cwd");
  auto user = OptString(j, "user");
  auto in = OptString(j, "stdin");
  auto tag = OptString(j, "tag");
  auto timeout = OptUint(j, "timeout_ms");
  auto max_out = OptUint(j, "max_output_bytes");
  auto background = OptBool(j, "background");
  for (const Error* e : {cwd ? nullptr : &cwd.error(), user ? nullptr : &user.error(),
                         in ? nullptr : &in.error(), tag ? nullptr : &tag.error(),
                         timeout ? nullptr : &timeout.error(), max_out ? nullptr : &max_out.error(),
                         background ? nullptr : &background.error()}) {
    if (e) return Fail(*e);
  }
  req.cwd = *cwd;
  req.user = *user;
  req.stdin_data = *in;
  req.tag = *tag;
  if (req.tag) {
    if (auto ok = ValidateTag(*req.tag); !ok) return Fail(ok.error());
  }
  if (*timeout && **timeout > 0) req.timeout_ms = *timeout;
  req.max_output_bytes = *max_out;
  if (req.max_output_bytes && *req.max_output_bytes > kMaxMaxOutputBytes) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("max_output_bytes is over the limit of {}", kMaxMaxOutputBytes));
  }
  req.background = *background;
  return req;
}

// --- ExecResult -------------------------------------------------------------------------------

json ExecResult::ToJson() const {
  json out = {{"pid", pid}, {"tag", OptJson(tag)}, {"truncated", truncated}};
  ExitToJson(exit, out);
  // Output that is not UTF-8 cannot travel in a JSON string; it is replaced (U+FFFD) here and
  // callers who need exact bytes use the NDJSON stream, which carries data_b64.
  out["stdout"] = stdout_data;
  out["stderr"] = stderr_data;
  return out;
}

Result<ExecResult> ExecResult::FromJson(const json& j) {
  if (!j.is_object() || !j.contains("pid")) {
    return Fail(ErrorCode::kInternal, "exec result is not an object with a pid");
  }
  ExecResult r;
  r.pid = Tolerant(j, "pid", 0);
  if (j.contains("tag") && j["tag"].is_string()) r.tag = j["tag"].get<std::string>();
  r.exit = ExitFromJson(j);
  r.stdout_data = Tolerant(j, "stdout", std::string());
  r.stderr_data = Tolerant(j, "stderr", std::string());
  r.truncated = Tolerant(j, "truncated", false);
  return r;
}

// --- ExecEvent --------------------------------------------------------------------------------

std::string ExecEvent::ToLine() const {
  switch (type) {
    case Type::kStdout:
    case Type::kStderr: {
      // Built by hand rather than through a json object: output is the bulk of all traffic
      // and this avoids copying every byte twice.
      std::string out;
      out.reserve(data.size() + data.size() / 8 + 64);
      out += type == Type::kStdout ? R"({"type":"stdout")" : R"({"type":"stderr")";
      if (offset) out += fmt::format(R"(,"offset":{})", *offset);
      if (IsValidUtf8(data)) {
        out += R"(,"data":)";
        AppendJsonString(out, data);
      } else {
        out += R"(,"data_b64":")";
        out += Base64Encode(data);
        out += '"';
      }
      out += '}';
      return out;
    }
    case Type::kStart:
    case Type::kAttached: {
      json j = {{"type", type == Type::kStart ? "start" : "attached"}, {"pid", pid},
                {"tag", OptJson(tag)}};
      return DumpJson(j);
    }
    case Type::kKeepalive:
      return R"({"type":"keepalive"})";
    case Type::kEnd: {
      json j = {{"type", "end"}};
      ExitToJson(exit, j);
      return DumpJson(j);
    }
    case Type::kError: {
      Error e = error.value_or(Error{ErrorCode::kInternal, "unknown error"});
      json j = {{"type", "error"},
                {"error", {{"code", ErrorCodeName(e.code)}, {"message", e.message}}}};
      return DumpJson(j);
    }
  }
  return "{}";
}

Result<ExecEvent> ExecEvent::FromJson(const json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return Fail(ErrorCode::kInternal, "event without a type");
  }
  const auto& t = j["type"].get_ref<const std::string&>();
  ExecEvent e;
  if (t == "start" || t == "attached" || t == "started") {
    e.type = t == "attached" ? Type::kAttached : Type::kStart;
    e.pid = Tolerant(j, "pid", 0);
    if (j.contains("tag") && j["tag"].is_string()) e.tag = j["tag"].get<std::string>();
  } else if (t == "stdout" || t == "stderr") {
    e.type = t == "stdout" ? Type::kStdout : Type::kStderr;
    if (j.contains("offset") && j["offset"].is_number_unsigned()) {
      e.offset = j["offset"].get<uint64_t>();
    }
    if (j.contains("data") && j["data"].is_string()) {
      e.data = j["data"].get<std::string>();
    } else if (j.contains("data_b64") && j["data_b64"].is_string()) {
      auto decoded = Base64Decode(j["data_b64"].get_ref<const std::string&>());
      if (!decoded) return Fail(decoded.error());
      e.data = std::move(*decoded);
    }
  } else if (t == "keepalive") {
    e.type = Type::kKeepalive;
  } else if (t == "end") {
    e.type = Type::kEnd;
    e.exit = ExitFromJson(j);
  } else if (t == "error") {
    e.type = Type::kError;
    Error err{ErrorCode::kInternal, "error"};
    if (j.contains("error") && j["error"].is_object()) {
      err.code = ErrorCodeFromName(Tolerant(j["error"], "code", std::string())).value_or(ErrorCode::kInternal);
      err.message = Tolerant(j["error"], "message", std::string());
    }
    e.error = err;
  } else {
    return Fail(ErrorCode::kInternal, fmt::format("unknown event type {}", t));
  }
  return e;
}

// --- SessionStart -----------------------------------------------------------------------------

json SessionStart::ToJson() const {
  json out = {{"type", "start"}, {"env", EnvToJson(env)}};
  if (cmd) out["cmd"] = CommandToJson(*cmd);
  if (cwd) out["cwd"] = *cwd;
  if (user) out["user"] = *user;
  if (tag) out["tag"] = *tag;
  if (pty) out["pty"] = {{"cols", pty->cols}, {"rows", pty->rows}};
  return out;
}

Result<SessionStart> SessionStart::FromJson(const json& j) {
  if (!j.is_object() || !j.contains("type") || j["type"] != "start") {
    return Fail(ErrorCode::kInvalidArgument, R"(the first message must be {"type":"start",...})");
  }
  SessionStart s;
  if (j.contains("cmd") && !j["cmd"].is_null()) {
    auto cmd = CommandFromJson(j["cmd"]);
    if (!cmd) return Fail(cmd.error());
    s.cmd = std::move(*cmd);
  }
  auto env = EnvFromJson(j);
  if (!env) return Fail(env.error());
  s.env = std::move(*env);
  auto cwd = OptString(j, "cwd");
  auto user = OptString(j, "user");
  auto tag = OptString(j, "tag");
  if (!cwd) return Fail(cwd.error());
  if (!user) return Fail(user.error());
  if (!tag) return Fail(tag.error());
  s.cwd = *cwd;
  s.user = *user;
  s.tag = *tag;
  if (s.tag) {
    if (auto ok = ValidateTag(*s.tag); !ok) return Fail(ok.error());
  }
  if (j.contains("pty") && !j["pty"].is_null()) {
    const auto& p = j["pty"];
    if (!p.is_object()) return Fail(ErrorCode::kInvalidArgument, "pty must be an object");
    auto cols = OptUint(p, "cols");
    auto rows = OptUint(p, "rows");
    if (!cols || !rows) return Fail(ErrorCode::kInvalidArgument, "pty cols/rows must be integers");
    PtySize size;
    if (*cols) size.cols = static_cast<uint16_t>(std::clamp<uint64_t>(**cols, 1, 10000));
    if (*rows) size.rows = static_cast<uint16_t>(std::clamp<uint64_t>(**rows, 1, 10000));
    s.pty = size;
  }
  return s;
}

// --- ProcessInfo ------------------------------------------------------------------------------

json ProcessInfo::ToJson() const {
  json out = {{"pid", pid},
              {"tag", OptJson(tag)},
              {"cmd", cmd},
              {"user", user},
              {"pty", pty},
              {"status", running ? "running" : "exited"},
              {"started_at", started_at},
              {"ended_at", OptJson(ended_at)},
              {"stdout_bytes", stdout_bytes},
              {"stderr_bytes", stderr_bytes}};
  ExitToJson(exit, out);
  if (running) out["duration_ms"] = nullptr;
  return out;
}

Result<ProcessInfo> ProcessInfo::FromJson(const json& j) {
  if (!j.is_object() || !j.contains("pid")) {
    return Fail(ErrorCode::kInternal, "process is not an object with a pid");
  }
  ProcessInfo p;
  p.pid = Tolerant(j, "pid", 0);
  if (j.contains("tag") && j["tag"].is_string()) p.tag = j["tag"].get<std::string>();
  p.cmd = j.contains("cmd") ? j["cmd"] : json();
  p.user = Tolerant(j, "user", std::string());
  p.pty = Tolerant(j, "pty", false);
  p.running = Tolerant(j, "status", std::string()) == "running";
  p.exit = ExitFromJson(j);
  p.started_at = Tolerant(j, "started_at", std::string());
  if (j.contains("ended_at") && j["ended_at"].is_string()) {
    p.ended_at = j["ended_at"].get<std::string>();
  }
  p.stdout_bytes = Tolerant(j, "stdout_bytes", uint64_t{0});
  p.stderr_bytes = Tolerant(j, "stderr_bytes", uint64_t{0});
  return p;
}

// --- signals ----------------------------------------------------------------------------------

Result<int> SignalFromName(std::string_view name) {
  int number = 0;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), number);
  if (ec == std::errc() && ptr == name.data() + name.size() && !name.empty()) {
    if (number < 1 || number >= NSIG) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("no signal number {}", number));
    }
    return number;
  }
  std::string upper;
  for (char c : name) upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (upper.starts_with("SIG")) upper.erase(0, 3);
  for (const auto& s : kSignals) {
    if (upper == s.name) return s.number;
  }
  return Fail(ErrorCode::kInvalidArgument, fmt::format("unknown signal {}", std::string(name)));
}

std::string SignalName(int signo) {
  for (const auto& s : kSignals) {
    if (s.number == signo) return s.name;
  }
  return std::to_string(signo);
}

// --- bytes ------------------------------------------------------------------------------------

namespace {

// Length of the UTF-8 sequence a lead byte starts; 0 for a byte that cannot start one.
int SequenceLength(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

}  // namespace

size_t CompleteUtf8Prefix(std::string_view data) {
  // Look back at most 3 bytes for the lead byte of a sequence that runs past the end.
  size_t n = data.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(data[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for the lead
    int len = SequenceLength(c);
    if (len > static_cast<int>(back)) return n - back;  // incomplete: hold it back
    return n;
  }
  return n;
}

bool IsValidUtf8(std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const auto* end = p + data.size();
  while (p < end) {
    // Fast path: 8 ASCII bytes at a time.
    if (end - p >= 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      if ((word & 0x8080808080808080ULL) == 0) {
        p += 8;
        continue;
      }
    }
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int len = SequenceLength(c);
    if (len == 0 || end - p < len) return false;
    for (int i = 1; i < len; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
    }
    // Overlong forms, surrogates and code points above U+10FFFF.
    if (c == 0xE0 && p[1] < 0xA0) return false;
    if (c == 0xED && p[1] > 0x9F) return false;
    if (c == 0xF0 && p[1] < 0x90) return false;
    if (c == 0xF4 && p[1] > 0x8F) return false;
    p += len;
  }
  return true;
}

std::string Base64Encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return Fail(ErrorCode::kInvalidArgument, "bad base64 length");
  std::string out(3 * (text.size() / 4), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return Fail(ErrorCode::kInvalidArgument, "bad base64");
  // EVP_DecodeBlock counts padding as zero bytes.
  size_t len = static_cast<size_t>(n);
  if (!text.empty() && text.back() == '=') --len;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

void AppendJsonString(std::string& out, std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t run = 0;  // start of the pending run of bytes that need no escaping
  for (size_t i = 0; i < data.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(data[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(data.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xF]);
    }
  }
  out.append(data.data() + run, data.size() - run);
  out.push_back('"');
}

std::string ExitHeaderValue(const ExitStatus& exit) {
  if (!exit.exit_code) return {};
  std::string out = std::to_string(*exit.exit_code);
  if (exit.signal) out += " " + *exit.signal;
  if (exit.timed_out) out += " timed_out";
  return out;
}

std::optional<ExitStatus> ParseExitHeader(std::string_view value) {
  ExitStatus exit;
  size_t space = value.find(' ');
  std::string_view code = value.substr(0, space);
  int n = 0;
  auto [end, ec] = std::from_chars(code.data(), code.data() + code.size(), n);
  if (code.empty() || ec != std::errc() || end != code.data() + code.size() || n < 0 || n > 255) {
    return std::nullopt;
  }
  exit.exit_code = n;
  std::string_view rest = space == std::string_view::npos ? std::string_view() : value.substr(space + 1);
  while (!rest.empty()) {
    size_t next = rest.find(' ');
    std::string_view token = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
    if (token == "timed_out") {
      exit.timed_out = true;
    } else if (!exit.signal && !token.empty() && token.size() <= 16 &&
               std::ranges::all_of(token, [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); })) {
      exit.signal = std::string(token);
    } else {
      return std::nullopt;
    }
  }
  return exit;
}

}  // namespace berth::protocol
