// Fuzz target for berthd's own request handling: routing, authentication, scopes and JSON
// bodies of the v1 API and /mcp, in the real ApiServer (in-process, on a unix socket), over
// the fake hypervisor, a fake transport and fake disks, with a real SQLite store in a temp
// directory (on /dev/shm when there is one: fsyncs are the cost of every create). Each input:
//  1. goes as raw bytes to the server: as is, then with the operator key's Authorization
//     added to the first request, then with a read key's (scopes must hold);
//  2. its body (after "\r\n\r\n") goes through the body parsers berthd uses: ParseJson,
//     ParseCreateRequest, ApplyPatch.
// Nothing reaches the host: no libvirt, no qemu-img, no agent (agent routes find no socket).
// A server that no longer answers /v1/health within kHangLimit after an input aborts.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "controller/api/api_server.h"
#include "controller/api/auth.h"
#include "controller/api/local_backend.h"
#include "controller/hypervisor/fake_hypervisor.h"
#include "controller/preview/preview_service.h"
#include "controller/store/store.h"
#include "controller/workspace/request.h"
#include "controller/workspace/service.h"
#include "controller/workspace/transport.h"
#include "mcp/mcp_http.h"

namespace {

using namespace berth;
namespace fs = std::filesystem;

constexpr std::chrono::milliseconds kHangLimit{10'000};
// A streamed answer (events?follow=1, a wait) is cut after this long without a byte, or this
// long in all: a fuzz input may ask for a stream that never ends by design.
constexpr std::chrono::milliseconds kQuietCut{300};
constexpr std::chrono::milliseconds kStreamCut{2'000};

// The unix transport's shape with nothing behind it: agent calls find no socket.
class NoAgentTransport : public workspace::Transport {
 public:
  std::string_view name() const override { return "unix"; }
  Status BeforeStart(workspace::Workspace&, const workspace::Layout&, bool,
                     hypervisor::DomainSpec&) override {
    return {};
  }
  void AfterStop(const workspace::Workspace&, const workspace::Layout&, bool) override {}
  Result<Endpoint> AgentEndpoint(const workspace::Workspace&,
                                 const workspace::Layout& layout) const override {
    Endpoint ep;
    ep.kind = Endpoint::Kind::kUnix;
    ep.path = layout.agent_socket().string();
    return ep;
  }
  bool SharesHostCpu() const override { return true; }
};

// The berthd's directory, removed at exit (it may be on /dev/shm, which is memory).
std::string* g_fuzz_dir = nullptr;

void RemoveFuzzDir() {
  std::error_code ec;
  if (g_fuzz_dir != nullptr) fs::remove_all(*g_fuzz_dir, ec);
}

// One berthd for the whole process, never destroyed (libFuzzer exits without unwinding).
struct FuzzBerthd {
  FuzzBerthd() {
    spdlog::set_level(spdlog::level::off);
    std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/berthd-fuzz-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir = tmpl;
    g_fuzz_dir = new std::string(tmpl);
    std::atexit(RemoveFuzzDir);
    // An image "base", so creates get as far as the fake disks.
    fs::create_directories(dir / "images/base/v1");
    for (const char* f : {"disk.qcow2", "vmlinuz", "initrd.img"}) std::ofstream(dir / "images/base/v1" / f) << "x";
    std::ofstream(dir / "images/base/v1/image.json") << "{}";
    fs::create_directory_symlink("v1", dir / "images/base/current");

    auto opened = store::Store::Open((dir / "berth.db").string());
    if (!opened) std::abort();
    store = std::move(*opened);
    auth = std::make_unique<api::Authenticator>(*store);
    auto tenant = store->CreateTenant("default", 1);
    auto other = store->CreateTenant("other", 1);
    if (!tenant || !other) std::abort();
    auto op = auth->CreateKey(tenant->id, api::Scope::kOperator, "fuzz operator");
    auto reader = auth->CreateKey(other->id, api::Scope::kRead, "fuzz reader");
    if (!op || !reader) std::abort();
    operator_key = op->secret;
    read_key = reader->secret;

    workspace::ServiceOptions o;
    o.data_dir = dir;
    o.images_dir = dir / "images";
    o.accel = "tcg";
    o.boot_timeout = std::chrono::seconds(2);
    o.stop_grace = std::chrono::seconds(1);
    o.idle_poll = std::chrono::hours(1);
    o.reconcile_every = std::chrono::hours(1);
    o.image_gc_every = std::chrono::seconds(0);
    o.probe = [](const agent_client::AgentLink&,
                 std::chrono::milliseconds) -> workspace::Task<Result<nlohmann::json>> {
      co_return nlohmann::json::object();
    };
    o.make_disks = [](const workspace::ImageVersion&, const workspace::Layout& layout, int) -> Status {
      std::ofstream(layout.root_disk(0)) << "root";
      std::ofstream(layout.data_disk(0)) << "data";
      return {};
    };
    service = std::make_unique<workspace::WorkspaceService>(
        *store, hypervisor, std::make_unique<NoAgentTransport>(), o);
    if (!service->Run()) std::abort();
    previews = std::make_unique<preview::PreviewService>(
        preview::PreviewConfig{}, *store, [] { return static_cast<int64_t>(std::time(nullptr)); });

    // /mcp as berthd serves it: each session calls the service in-process as its key's principal.
    mcp::BackendFactory backends = [this](http::Exchange&, const std::string& key)
        -> Result<std::shared_ptr<mcp::Backend>> {
      auto principal = auth->Authenticate("Bearer " + key);
      if (!principal) return Fail(principal.error());
      return std::make_shared<api::LocalBackend>(*service, *previews, io, *principal, mcp_calls);
    };
    mcp = std::make_unique<mcp::McpHttpContext>(mcp_pool, std::move(backends));
    api::ApiOptions aopt;
    aopt.previews = previews.get();
    aopt.server.header_timeout = std::chrono::seconds(2);
    aopt.server.idle_timeout = std::chrono::seconds(2);
    aopt.server.io_timeout = std::chrono::seconds(2);
    aopt.server.body_timeout = std::chrono::seconds(2);
    aopt.wake_timeout = std::chrono::seconds(2);
    aopt.extra_routes = [this](http::Router& router) {
      http::Handler handler = [this](http::Exchange& ex) { return mcp::ServeMcpHttp(ex, *mcp); };
      router.Add(http::bhttp::verb::post, "/mcp", handler);
      router.Add(http::bhttp::verb::get, "/mcp", handler);
      router.Add(http::bhttp::verb::delete_, "/mcp", handler);
    };
    server = std::make_unique<api::ApiServer>(io, pool, *store, *service, *auth, aopt);
    auto bound = server->Listen(*Endpoint::Parse("unix:" + (dir / "api.sock").string()));
    if (!bound) std::abort();
    socket_path = bound->path;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([this] {
        auto guard = boost::asio::make_work_guard(io);
        io.run();
      });
    }
  }

  fs::path dir;
  std::string socket_path;
  std::string operator_key;
  std::string read_key;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<api::Authenticator> auth;
  hypervisor::FakeHypervisor hypervisor;
  std::unique_ptr<workspace::WorkspaceService> service;
  std::unique_ptr<preview::PreviewService> previews;
  boost::asio::io_context io{2};
  boost::asio::thread_pool pool{4};
  boost::asio::thread_pool mcp_pool{2};
  std::shared_ptr<api::McpCalls> mcp_calls = std::make_shared<api::McpCalls>();
  std::unique_ptr<mcp::McpHttpContext> mcp;
  std::unique_ptr<api::ApiServer> server;
  std::vector<std::thread> threads;
};

FuzzBerthd& Berthd() {
  static FuzzBerthd* berthd = new FuzzBerthd();
  return *berthd;
}

const bool kVerbose = std::getenv("BERTH_FUZZ_VERBOSE") != nullptr;

// Writes `bytes` (then half-closes) while reading the answer, until the server closes, or the
// stream goes quiet for kQuietCut after the request is out, or kStreamCut in all. Returns the
// first bytes of the answer (for BERTH_FUZZ_VERBOSE and the liveness check).
std::string Exchange(const std::string& path, std::string_view bytes) {
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
  auto start = std::chrono::steady_clock::now();
  auto last_byte = start;
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (now - start > kStreamCut || (write_done && now - last_byte > kQuietCut)) break;
    pollfd p{fd, static_cast<short>(POLLIN | (write_done ? 0 : POLLOUT)), 0};
    if (poll(&p, 1, 50) < 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
      if (n > 0) {
        last_byte = std::chrono::steady_clock::now();
        if (head.size() < 200) head.append(buf, static_cast<size_t>(std::min<ssize_t>(n, 200)));
      }
    }
    if (!write_done && (p.revents & POLLOUT)) {
      ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n > 0) off += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) write_done = true;  // the server closed
      if (off == bytes.size()) write_done = true;
      if (write_done) {
        shutdown(fd, SHUT_WR);
        last_byte = std::chrono::steady_clock::now();
      }
    }
  }
  close(fd);
  if (kVerbose) fprintf(stderr, "  -> %s\n", head.substr(0, head.find('\r')).c_str());
  return head;
}

// The first request with an Authorization header for `key` (any the input had stays too,
// after it: Beast keeps the first of a repeated field's values for find()).
std::optional<std::string> WithKey(std::string_view bytes, const std::string& key) {
  auto line_end = bytes.find("\r\n");
  if (line_end == std::string_view::npos) return std::nullopt;
  std::string out(bytes.substr(0, line_end + 2));
  out += "Authorization: Bearer " + key + "\r\n";
  out += bytes.substr(line_end + 2);
  return out;
}

void FuzzBodies(std::string_view bytes) {
  auto body_at = bytes.find("\r\n\r\n");
  for (std::string_view text :
       {bytes, body_at == std::string_view::npos ? std::string_view() : bytes.substr(body_at + 4)}) {
    auto j = ParseJson(text);
    if (!j) continue;
    (void)DumpJson(*j);
    (void)workspace::ParseCreateRequest(*j);
    workspace::Workspace ws;
    ws.name = "w";
    ws.env = nlohmann::json::object();
    ws.labels = nlohmann::json::object();
    (void)workspace::ApplyPatch(*j, ws);
    (void)OptionalString(*j, "name");
    (void)OptionalInt(*j, "timeout_s");
    (void)OptionalBool(*j, "force");
  }
}

void CheckAlive(FuzzBerthd& b) {
  auto deadline = std::chrono::steady_clock::now() + kHangLimit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Exchange(b.socket_path, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200")) {
      return;
    }
  }
  fprintf(stderr, "berthd_fuzz: /v1/health does not answer within %lld ms\n",
          static_cast<long long>(kHangLimit.count()));
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Bigger inputs test nothing the header and body limits do not, and slow the fuzzer down.
  if (size > 256 * 1024) return 0;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  FuzzBodies(bytes);
  FuzzBerthd& b = Berthd();
  Exchange(b.socket_path, bytes);
  if (auto authed = WithKey(bytes, b.operator_key)) Exchange(b.socket_path, *authed);
  if (auto read = WithKey(bytes, b.read_key)) Exchange(b.socket_path, *read);
  CheckAlive(b);
  return 0;
}
