// Fuzz target for the agent's request handling. Each input is:
//  1. sent as raw bytes to the REAL agent (http::Server with the real routers, in-process on
//     unix sockets, one long-lived agent per process): once to the authenticated API as is,
//     once to the local token-less socket, and once to the API with the agent's token added to
//     the first request when its path is on a side-effect-free allowlist (health, info, ports,
//     activity, leases, tunnel) — exec, files and processes are left out so fuzzing never runs
//     commands or writes files; their JSON bodies are fuzzed by (2);
//  2. fed to the pure parsers the server and clients use: Endpoint::Parse, SplitTarget,
//     PercentDecode, Query::Parse, the exec/files/ports protocol JSON parsers (on the whole input
//     and on the HTTP body after "\r\n\r\n"), /proc parsers, durations and tunnel hosts.
// A response that does not end within kHangLimit is a hang and aborts.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <spdlog/spdlog.h>

#include "common/duration.h"
#include "common/endpoint.h"
#include "common/http/url.h"
#include "common/json.h"
#include "common/protocol/exec.h"
#include "common/protocol/files.h"
#include "common/v1/admin.h"
#include "common/v1/events.h"
#include "common/v1/time.h"
#include "common/v1/workspace.h"
#include "common/protocol/ports.h"
#include "guest-agent/activity.h"
#include "guest-agent/agent.h"
#include "guest-agent/keepawake.h"
#include "guest-agent/ports_proc.h"
#include "guest-agent/tunnel_hosts.h"

namespace {

using namespace berth;

constexpr std::chrono::milliseconds kHangLimit{10'000};
constexpr std::string_view kToken = "fuzz-token-0123456789abcdef0123456789abcdef";

// One agent for the whole process, never destroyed: libFuzzer exits without unwinding, and a
// running I/O thread must not see its agent destroyed under it.
struct FuzzAgent {
  FuzzAgent() {
    spdlog::set_level(spdlog::level::off);
    char tmpl[] = "/tmp/berth-fuzz-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) std::abort();
    dir = tmpl;
    agent::AgentOptions options;
    options.token = std::string(kToken);
    options.default_user = "nobody";
    options.local_socket = dir + "/local.sock";
    options.workspace_dir = dir;
    options.listen.push_back(*Endpoint::Parse("unix:" + dir + "/api.sock"));
    // Short timeouts: a request the fuzzer leaves unfinished ends at EOF anyway, but a header
    // that never completes must not hold a connection for half a minute.
    options.server.header_timeout = std::chrono::seconds(2);
    options.server.idle_timeout = std::chrono::seconds(2);
    options.server.io_timeout = std::chrono::seconds(2);
    options.blocking_threads = 1;
    the_agent = std::make_unique<agent::Agent>(io, options);
    auto bound = the_agent->Start();
    if (!bound) std::abort();
    api_path = (*bound)[0].path;
    local_path = options.local_socket;
    thread = std::thread([this] {
      auto guard = boost::asio::make_work_guard(io);
      io.run();
    });
  }
  std::string dir;
  std::string api_path;
  std::string local_path;
  boost::asio::io_context io{1};
  std::unique_ptr<agent::Agent> the_agent;
  std::thread thread;
};

FuzzAgent& Agent() {
  static FuzzAgent* agent = new FuzzAgent();
  return *agent;
}

// Writes `bytes` and reads the answer concurrently (a server answering early must not
// deadlock against a client still writing), then reads until the server closes.
// BERTH_FUZZ_VERBOSE=1 prints the first line of every answer (for corpus work).
const bool kVerbose = std::getenv("BERTH_FUZZ_VERBOSE") != nullptr;

void Exchange(const std::string& path, std::string_view bytes) {
  std::string head;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) std::abort();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) std::abort();
  size_t off = 0;
  bool write_done = bytes.empty();
  if (write_done) shutdown(fd, SHUT_WR);
  char buf[65536];
  auto deadline = std::chrono::steady_clock::now() + kHangLimit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      fprintf(stderr, "request_fuzz: no end of response within %lld ms\n",
              static_cast<long long>(kHangLimit.count()));
      std::abort();
    }
    pollfd p{fd, static_cast<short>(POLLIN | (write_done ? 0 : POLLOUT)), 0};
    if (poll(&p, 1, static_cast<int>(left.count())) < 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
      if (kVerbose && n > 0 && head.size() < 200) head.append(buf, static_cast<size_t>(n));
    }
    if (!write_done && (p.revents & POLLOUT)) {
      ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n > 0) off += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) write_done = true;  // the server closed
      if (off == bytes.size()) write_done = true;
      if (write_done) shutdown(fd, SHUT_WR);
    }
  }
  close(fd);
  if (kVerbose) {
    fprintf(stderr, "  %s -> %s\n", path.c_str(), head.substr(0, head.find('\r')).c_str());
  }
}

// The first request's decoded path, if the bytes start with a request line.
std::optional<std::string> FirstPath(std::string_view bytes) {
  auto line_end = bytes.find("\r\n");
  if (line_end == std::string_view::npos) return std::nullopt;
  std::string_view line = bytes.substr(0, line_end);
  auto sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return std::nullopt;
  auto sp2 = line.find(' ', sp1 + 1);
  std::string_view target = line.substr(sp1 + 1, sp2 == std::string_view::npos ? std::string_view::npos : sp2 - sp1 - 1);
  auto decoded = http::PercentDecode(http::SplitTarget(target).first);
  if (!decoded) return std::nullopt;
  return *decoded;
}

bool AllowedWithToken(const std::string& path) {
  for (std::string_view prefix : {"/v1/health", "/v1/info", "/v1/ports", "/v1/activity",
                                  "/v1/leases", "/v1/tunnel"}) {
    if (path.starts_with(prefix) && path.find("/..") == std::string::npos) {
      // Exactly the route or below it ("/v1/leases/3"), not "/v1/portsXYZ/../exec".
      if (path.size() == prefix.size() || path[prefix.size()] == '/' || path[prefix.size()] == '?') {
        return true;
      }
    }
  }
  return false;
}

void FuzzJson(const nlohmann::json& j) {
  (void)protocol::ExecRequest::FromJson(j);
  (void)protocol::ExecResult::FromJson(j);
  (void)protocol::ExecEvent::FromJson(j);
  (void)protocol::SessionStart::FromJson(j);
  (void)protocol::ProcessInfo::FromJson(j);
  (void)protocol::CommandFromJson(j);
  (void)protocol::FileInfoFromJson(j);
  (void)protocol::DirListingFromJson(j);
  (void)protocol::WatchEventFromJson(j);
  (void)protocol::TarResultFromJson(j);
  (void)protocol::PortListFromJson(j);
  (void)protocol::LeaseRequestFromJson(j);
  (void)protocol::LeaseDurationFromJson(j);
  (void)protocol::LeaseFromJson(j);
  if (auto r = protocol::ExecRequest::FromJson(j)) (void)protocol::ExecRequest::FromJson(r->ToJson());
  if (auto r = protocol::SessionStart::FromJson(j)) (void)protocol::SessionStart::FromJson(r->ToJson());
  // berthd's answers as its clients read them (common/v1): never a throw, whatever comes.
  if (auto r = v1::WorkspaceFromJson(j)) (void)v1::WorkspaceFromJson(v1::ToJson(*r));
  (void)v1::WorkspacePageFromJson(j);
  if (auto r = v1::CreateWorkspaceFromJson(j)) (void)v1::CreateWorkspaceFromJson(v1::ToJson(*r));
  if (auto r = v1::PatchWorkspaceFromJson(j)) (void)v1::PatchWorkspaceFromJson(v1::ToJson(*r));
  (void)v1::EventListFromJson(j);
  (void)v1::FollowLineFromJson(j);
  (void)v1::UsageFromJson(j);
  (void)v1::MeFromJson(j);
  (void)v1::NewKeyFromJson(j);
  (void)v1::KeyListFromJson(j);
  (void)v1::TenantListFromJson(j);
}

void FuzzText(std::string_view text) {
  (void)Endpoint::Parse(text);
  auto [path, query] = http::SplitTarget(text);
  (void)http::PercentDecode(path);
  if (auto q = http::Query::Parse(query)) {
    (void)q->GetInt("port", 0, 1, 65535);
    (void)q->GetBool("recursive", false);
  }
  (void)http::PercentEncode(text);
  (void)protocol::NormalizePath(text);
  (void)protocol::ParseMode(text);
  (void)protocol::ParseTime(text);
  (void)v1::ParseTime(text);
  (void)v1::ParseTimeArgument(text);
  (void)protocol::SignalFromName(text);
  (void)protocol::ValidateTag(text);
  (void)protocol::Base64Decode(text);
  (void)protocol::CompleteUtf8Prefix(text);
  (void)protocol::IsValidUtf8(text);
  (void)protocol::ParseLeaseId(text);
  (void)ParseDuration(text);
  (void)agent::TunnelAddress(text, {});
  (void)agent::SocketInodeFromLink(text);
  (void)agent::JoinCmdline(text, 64);
  (void)agent::ParseProcStat(text);
}

void FuzzParsers(std::string_view bytes) {
  FuzzText(bytes);
  (void)agent::ParseProcNetTcp(bytes, false);
  (void)agent::ParseProcNetTcp(bytes, true);
  // Line by line too: the request target and header values are what reach these parsers.
  size_t lines = 0;
  for (std::string_view rest = bytes; !rest.empty() && lines < 64; ++lines) {
    auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    if (line.ends_with('\r')) line.remove_suffix(1);
    auto sp1 = line.find(' ');
    if (sp1 != std::string_view::npos) FuzzText(line.substr(sp1 + 1, line.find(' ', sp1 + 1) - sp1 - 1));
    auto colon = line.find(": ");
    if (colon != std::string_view::npos) FuzzText(line.substr(colon + 2));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  auto body_at = bytes.find("\r\n\r\n");
  for (std::string_view json_text : {bytes, body_at == std::string_view::npos
                                                 ? std::string_view()
                                                 : bytes.substr(body_at + 4)}) {
    auto j = ParseJson(json_text);  // as the agent and the clients parse
    if (j) FuzzJson(*j);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Bigger inputs test nothing the header and body limits do not, and slow the fuzzer down.
  if (size > 256 * 1024) return 0;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  FuzzParsers(bytes);

  FuzzAgent& agent = Agent();
  Exchange(agent.api_path, bytes);
  Exchange(agent.local_path, bytes);
  auto path = FirstPath(bytes);
  if (path && AllowedWithToken(*path)) {
    auto line_end = bytes.find("\r\n");
    std::string authed(bytes.substr(0, line_end + 2));
    authed += "Authorization: Bearer ";
    authed += kToken;
    authed += "\r\n";
    authed += bytes.substr(line_end + 2);
    Exchange(agent.api_path, authed);
  }
  return 0;
}
