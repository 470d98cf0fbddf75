#include "controller/berthd.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>
#include <sstream>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "common/unix_time.h"
#include "controller/api/api_server.h"
#include "controller/api/auth.h"
#include "controller/api/local_backend.h"
#include "controller/hypervisor/libvirt_hypervisor.h"
#include "controller/network/network_manager.h"
#include "controller/store/store.h"
#include "controller/workspace/service.h"
#include "mcp/mcp_http.h"

namespace berth {

namespace fs = std::filesystem;

namespace {

Result<workspace::Limits> ParseLimitsConfig(const nlohmann::json& v) {
  if (!v.is_object()) return Fail(ErrorCode::kInvalidArgument, "must be an object");
  workspace::Limits out;
  for (const auto& [k, n] : v.items()) {
    int64_t* field = k == "workspaces"   ? &out.workspaces
                     : k == "vcpus"      ? &out.vcpus
                     : k == "memory_mib" ? &out.memory_mib
                     : k == "disk_gib"   ? &out.disk_gib
                                         : nullptr;
    if (field == nullptr) return Fail(ErrorCode::kInvalidArgument, fmt::format("unknown key '{}'", k));
    if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > workspace::kMaxLimit) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("'{}' must be an integer between 0 and {}", k, workspace::kMaxLimit));
    }
    *field = n.get<int64_t>();
  }
  return out;
}

Result<workspace::DiskFloor> ParseDiskFloorConfig(const nlohmann::json& v) {
  if (!v.is_object()) return Fail(ErrorCode::kInvalidArgument, "must be an object");
  workspace::DiskFloor out;
  for (const auto& [k, n] : v.items()) {
    if (k == "bytes") {
      if (!n.is_number_integer() || n.get<int64_t>() < 0) {
        return Fail(ErrorCode::kInvalidArgument, "'bytes' must be a non-negative integer");
      }
      out.min_free_bytes = n.get<uint64_t>();
    } else if (k == "percent") {
      if (!n.is_number() || n.get<double>() < 0 || n.get<double>() > 100) {
        return Fail(ErrorCode::kInvalidArgument, "'percent' must be a number between 0 and 100");
      }
      out.min_free_percent = n.get<double>();
    } else {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("unknown key '{}'", k));
    }
  }
  return out;
}

}  // namespace

Status Config::LoadFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Fail(ErrnoError(errno, "open " + path.string()));
  std::stringstream text;
  text << in.rdbuf();
  auto j = ParseJson(text.str());
  if (!j) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("{} is not valid JSON: {}", path.string(), j.error().message));
  }
  if (!j->is_object()) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("{} is not a JSON object", path.string()));
  }
  // The key being read, for the message when its value has the wrong type: nlohmann's own
  // ("type must be string, but is number") does not say which key it was.
  std::string key;
  try {
    for (const auto& [k, v] : j->items()) {
      key = k;
      if (k == "listen") listen = v.get<std::string>();
      else if (k == "data_dir") data_dir = v.get<std::string>();
      else if (k == "images_dir") images_dir = v.get<std::string>();
      else if (k == "libvirt_uri") libvirt_uri = v.get<std::string>();
      else if (k == "transport") transport = v.get<std::string>();
      else if (k == "accel") accel = v.get<std::string>();
      else if (k == "agent_binary") agent_binary = v.get<std::string>();
      else if (k == "agent_user") agent_user = v.get<std::string>();
      else if (k == "max_concurrent_boots") max_concurrent_boots = v.get<int>();
      else if (k == "boot_timeout_s") boot_timeout_s = v.get<int>();
      else if (k == "stop_grace_s") stop_grace_s = v.get<int>();
      else if (k == "idle_poll_ms") idle_poll_ms = v.get<int>();
      else if (k == "reconcile_every_s") reconcile_every_s = v.get<int>();
      else if (k == "image_gc_every_s") image_gc_every_s = v.get<int>();
      else if (k == "events_kept") events_kept = v.get<int64_t>();
      else if (k == "io_threads") io_threads = v.get<int>();
      else if (k == "log_level") log_level = v.get<std::string>();
      else if (k == "web_root") web_root = v.get<std::string>();
      else if (k == "sessions") {
        auto parsed = api::ParseSessionOptions(v);
        if (!parsed) {
          return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: sessions: {}", path.string(), parsed.error().message));
        }
        sessions = *parsed;
      }
      else if (k == "max_connections") max_connections = v.get<int>();
      else if (k == "max_connections_per_source") max_connections_per_source = v.get<int>();
      else if (k == "max_connections_per_key") max_connections_per_key = v.get<int>();
      else if (k == "unauthenticated_header_timeout_s") unauthenticated_header_timeout_s = v.get<int>();
      else if (k == "limits") {
        auto parsed = ParseLimitsConfig(v);
        if (!parsed) {
          return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: limits: {}", path.string(), parsed.error().message));
        }
        limits = *parsed;
      } else if (k == "min_free_disk") {
        auto parsed = ParseDiskFloorConfig(v);
        if (!parsed) {
          return Fail(ErrorCode::kInvalidArgument,
                      fmt::format("{}: min_free_disk: {}", path.string(), parsed.error().message));
        }
        min_free_disk = *parsed;
      }
      else if (k == "preview") {
        auto parsed = preview::ParsePreviewConfig(v);
        if (!parsed) {
          return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: preview: {}", path.string(), parsed.error().message));
        }
        preview = std::move(*parsed);
      }
      else if (k == "desktop") {
        auto parsed = desktop::ParseDesktopConfig(v);
        if (!parsed) {
          return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: desktop: {}", path.string(), parsed.error().message));
        }
        desktop = std::move(*parsed);
      }
      else if (k == "network") {
        auto parsed = network::ParseNetworkConfig(v);
        if (!parsed) {
          return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: network: {}", path.string(), parsed.error().message));
        }
        network = std::move(*parsed);
      }
      else return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: unknown key '{}'", path.string(), k));
    }
  } catch (const nlohmann::json::exception& e) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("{}: '{}': {}", path.string(), key, e.what()));
  }
  return {};
}

Daemon::Daemon(Config config)
    : config_(std::move(config)), mcp_calls_(std::make_shared<api::McpCalls>()) {}

Daemon::~Daemon() { Shutdown(); }

std::string Daemon::url() const {
  return endpoint_.kind == Endpoint::Kind::kTcp
             ? fmt::format("http://{}:{}", endpoint_.host.find(':') != std::string::npos
                                               ? "[" + endpoint_.host + "]"
                                               : endpoint_.host,
                           endpoint_.port)
             : endpoint_.ToString();
}

// First start: tenant "default" and the operator's key (tenants and every tenant's keys) in
// admin.key. Later starts: when no operator key is active (the database's first key was
// revoked, or it predates the operator scope and migration 3 found no first key), a new one
// replaces admin.key, so whoever runs berthd is never locked out of tenants and keys.
Status Daemon::EnsureOperatorKey() {
  auto tenants = store_->ListTenants();
  if (!tenants) return Fail(tenants.error());
  bool first_start = tenants->empty();
  std::string tenant_id;
  if (first_start) {
    auto tenant = store_->CreateTenant("default", UnixNow());
    if (!tenant) return Fail(tenant.error());
    tenant_id = tenant->id;
  } else {
    auto keys = store_->ListKeys(std::nullopt);
    if (!keys) return Fail(keys.error());
    for (const auto& k : *keys) {
      if (k.scope == api::ScopeName(api::Scope::kOperator) && !k.revoked_at) return {};
    }
    auto home = store_->GetTenant("default");
    tenant_id = home ? home->id : tenants->front().id;
  }
  // The first key's name is what migration 3 looks for in databases made before the operator
  // scope existed.
  auto key = auth_->CreateKey(tenant_id, api::Scope::kOperator,
                              first_start ? "first admin key" : "operator key");
  if (!key) return Fail(key.error());
  auto path = admin_key_file();
  auto tmp = path;
  tmp += ".tmp";
  {
    // Created 0600 before the key is written: it is never readable by anyone else.
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Fail(ErrnoError(errno, "create " + tmp.string()));
    std::string line = key->secret + "\n";
    bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) return Fail(ErrnoError(errno, "write " + tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "rename " + path.string()));
  if (first_start) {
    spdlog::info("first start: created tenant 'default' and an operator key in {}", path.string());
  } else {
    spdlog::warn("no active operator key: wrote a new one to {}", path.string());
  }
  return {};
}

namespace {

// One berthd that runs VMs per host. Two would hand out the same workspace uids (each one's
// QEMU could then open the other's disks, which are that uid's alone), and share the nftables
// table 'inet berth' and the resolver's addresses (each would remove the other's rules). An
// exclusive flock(2) for berthd's life; O_CLOEXEC, so passt does not keep it after berthd.
constexpr const char* kHostLockPath = "/run/berthd-vms.lock";

Result<UniqueFd> LockHost(const fs::path& lock_path, const fs::path& data_dir) {
  UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return Fail(ErrnoError(errno, "open " + lock_path.string()));
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return Fail(ErrnoError(errno, "flock " + lock_path.string()));
    char holder[512] = {};
    ssize_t n = ::pread(fd.get(), holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "";
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("another berthd runs VMs on this host ({}): one berthd per host owns the "
                            "workspaces' uids and the nftables table 'inet berth'; stop it first",
                            who.empty() ? "its pid unknown" : who));
  }
  std::string me = fmt::format("pid {}, data dir {}\n", ::getpid(), data_dir.string());
  if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), me.data(), me.size(), 0) < 0) {
    spdlog::warn("{}: cannot note berthd's pid in it: {}", lock_path.string(), std::strerror(errno));
  }
  return fd;
}

}  // namespace

Status Daemon::Start() {
  // Everything berthd writes is its own unless it says otherwise (issue 12): the database holds
  // the workspaces' env, qemu-img's disks would be 0644, and so would every log and state file.
  // What another user must reach is opened up by name: the data and workspace directories for
  // QEMU's traversal (0711), each VM's own files given to its uid (transport.cc). Process-wide,
  // so it also covers what berthd's children (qemu-img, passt, host agents) create.
  ::umask(077);
  if (config_.max_connections < 1 || config_.max_connections_per_source < 0 ||
      config_.max_connections_per_key < 0 || config_.unauthenticated_header_timeout_s < 1) {
    return Fail(ErrorCode::kInvalidArgument,
                "max_connections must be at least 1, max_connections_per_source and "
                "max_connections_per_key at least 0 (0: no cap), "
                "unauthenticated_header_timeout_s at least 1");
  }
  // The preview rules again: a config built in code never went through the file's parser.
  if (auto s = preview::CheckPreviewConfig(config_.preview); !s) return s;
  // Before anything host-wide (the table, reconciling domains). Host-process agents (the unix
  // transport) and libvirt's test driver run no QEMU: tests start many such berthds at once.
  if (config_.transport != "unix" && !config_.libvirt_uri.starts_with("test:")) {
    auto lock = LockHost(kHostLockPath, config_.data_dir);
    if (!lock) return Fail(lock.error());
    host_lock_ = std::move(*lock);
  }
  std::error_code ec;
  fs::create_directories(config_.data_dir, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + config_.data_dir.string()));
  auto store = store::Store::Open((config_.data_dir / "berth.db").string());
  if (!store) return Fail(store.error());
  store_ = std::move(*store);
  store_->SetEventRetention(config_.events_kept);
  auth_ = std::make_unique<api::Authenticator>(*store_);
  if (auto s = EnsureOperatorKey(); !s) return s;

  auto hv = hypervisor::LibvirtHypervisor::Connect(config_.libvirt_uri);
  if (!hv) {
    return Fail(hv.error().code, fmt::format("libvirt at {}: {}", config_.libvirt_uri, hv.error().message));
  }
  hypervisor_ = std::move(*hv);

  // The guest network, before any guest can boot. Host-process agents (the unix transport,
  // tests) have no guest network to isolate, and one isolating berthd per host owns the table.
  network::NetworkConfig net = config_.network;
  if (config_.transport == "unix") {
    net.isolation = false;
    net.libvirt_qemu_dir.clear();  // no QEMU runs
  }
  if (!net.isolation && config_.transport != "unix") {
    // The operator turned isolation off. An isolating berthd that ran here before left its
    // table, whose catch-all refuses every uid of the range in none of its chains: this
    // berthd's passt and QEMU run under such uids, so its guests would be cut off.
    auto removed = network::Firewall::RemoveTable();
    if (!removed) {
      spdlog::warn("guest network: isolation is off, and berthd cannot check for an old nftables table "
                   "'inet berth' ({}); if one is there, guests cannot be reached", removed.error().message);
    } else if (*removed) {
      spdlog::warn("guest network: isolation is off: removed the nftables table 'inet berth' an earlier "
                   "berthd left, which would have cut this berthd's guests off");
    }
  }
  auto manager = network::NetworkManager::Start(net, *store_, UnixNow);
  if (!manager) return Fail(manager.error());
  network_ = std::move(*manager);
  if (auto failed = network_->install_error()) {
    spdlog::error("guest network: {}; no guest will boot until this is fixed (or set "
                  "\"network\": {{\"isolation\": false}} in the config)", failed->message);
  } else {
    spdlog::info("guest network: {}", net.isolation ? "isolated (nftables table inet berth)" : "not isolated");
  }

  workspace::TransportOptions topt;
  topt.name = config_.transport;
  topt.agent_binary = config_.agent_binary;
  topt.agent_user = config_.agent_user;
  // passt and QEMU run under each workspace's own uid, isolated or not; isolation adds the
  // filtering resolver.
  topt.network_isolation = net.isolation;
  topt.passt_binary = net.passt_binary;
  topt.debug_forwards = net.debug_forwards;
  if (!net.debug_forwards.empty()) {
    spdlog::warn("guest network: network.debug_forwards is set: {} guest port(s) of every VM forwarded from "
                 "the host's 127.0.0.1 without Berth authentication (benchmarks and debugging only){}",
                 net.debug_forwards.size(), config_.transport == "unix" ? "; the unix transport ignores it" : "");
  }
  auto transport = workspace::MakeTransport(topt);
  if (!transport) return Fail(transport.error());

  workspace::ServiceOptions sopt;
  sopt.data_dir = config_.data_dir;
  sopt.images_dir = config_.images_dir;
  sopt.accel = config_.accel;
  sopt.max_concurrent_boots = config_.max_concurrent_boots;
  sopt.boot_timeout = std::chrono::seconds(config_.boot_timeout_s);
  sopt.stop_grace = std::chrono::seconds(config_.stop_grace_s);
  sopt.idle_poll = std::chrono::milliseconds(config_.idle_poll_ms);
  sopt.reconcile_every = std::chrono::seconds(config_.reconcile_every_s);
  sopt.image_gc_every = std::chrono::seconds(config_.image_gc_every_s);
  sopt.network = network_.get();
  sopt.default_limits = config_.limits;
  sopt.disk_floor = config_.min_free_disk;
  sopt.host_disk = config_.host_disk_for_test;
  service_ = std::make_unique<workspace::WorkspaceService>(*store_, *hypervisor_,
                                                           std::move(*transport), std::move(sopt));
  if (auto s = service_->Run(); !s) return s;

  previews_ = std::make_unique<preview::PreviewService>(config_.preview, *store_, UnixNow);
  // The API's blocking calls are short SQLite reads (auth misses, events, usage): a few threads.
  pool_ = std::make_unique<boost::asio::thread_pool>(4);
  mcp_pool_ = std::make_unique<boost::asio::thread_pool>(8);
  // /mcp in-process: each session acts through a LocalBackend as the key's principal, calling
  // the workspace service and the agents directly (no loopback HTTP).
  mcp::BackendFactory backends = [this](http::Exchange& ex, const std::string& key)
      -> Result<std::shared_ptr<mcp::Backend>> {
    auto principal = auth_->Authenticate("Bearer " + key);
    if (!principal) return Fail(principal.error());
    std::string origin = fmt::format("{}://{}", ex.secure() ? "https" : "http", ex.header(boost::beast::http::field::host));
    return std::make_shared<api::LocalBackend>(*service_, *previews_, io_, *principal, mcp_calls_, desktop_.get(),
                                               pool_.get(), std::move(origin));
  };
  mcp_ = std::make_unique<mcp::McpHttpContext>(*mcp_pool_, std::move(backends));
  // The desktop's events go to the workspace's timeline (SQLite: on the API pool, in order).
  std::function<int64_t()> desktop_clock = config_.desktop.clock_for_test;
  if (!desktop_clock) desktop_clock = UnixNow;
  desktop_ = std::make_unique<desktop::DesktopService>(
      config_.desktop, config_.data_dir, desktop_clock, io_, *pool_, [this](const desktop::ControlEvent& e) {
        auto recorded = service_->RecordEvent(e.workspace_id, e.type, e.message, e.data, e.Actor());
        if (!recorded && recorded.error().code != ErrorCode::kNotFound) {
          spdlog::warn("desktop {}: {}: {}", e.workspace_id, e.type, recorded.error().message);
        }
      });
  desktop_->Start();
  api::ApiOptions aopt;
  aopt.network = service_.get();
  aopt.previews = previews_.get();
  aopt.desktop = desktop_.get();
  aopt.web_root = config_.web_root;
  aopt.sessions = config_.sessions;
  aopt.server.max_connections = static_cast<size_t>(config_.max_connections);
  aopt.server.max_connections_per_source = static_cast<size_t>(config_.max_connections_per_source);
  aopt.server.max_connections_per_key = static_cast<size_t>(config_.max_connections_per_key);
  aopt.server.shed_unadmitted = true;  // Handle admits every authenticated request
  aopt.server.unadmitted_header_timeout =
      std::chrono::seconds(config_.unauthenticated_header_timeout_s);
  // MCP over streamable HTTP; the handler checks the API key itself at initialize, and every
  // tool acts as that key's principal, so a key sees the same through MCP as through the API.
  aopt.extra_routes = [this](http::Router& router) {
    http::Handler handler = [this](http::Exchange& ex) { return mcp::ServeMcpHttp(ex, *mcp_); };
    router.Add(http::bhttp::verb::post, "/mcp", handler);
    router.Add(http::bhttp::verb::get, "/mcp", handler);
    router.Add(http::bhttp::verb::delete_, "/mcp", handler);
  };
  api_ = std::make_unique<api::ApiServer>(io_, *pool_, *store_, *service_, *auth_, aopt);
  auto listen = Endpoint::Parse(config_.listen.find(':') != std::string::npos &&
                                        !config_.listen.starts_with("tcp:") &&
                                        !config_.listen.starts_with("unix:")
                                    ? "tcp:" + config_.listen
                                    : config_.listen);
  if (!listen) return Fail(listen.error());
  auto bound = api_->Listen(*listen);
  if (!bound) return Fail(bound.error());
  endpoint_ = *bound;
  if (!config_.preview.listen.empty()) {
    auto where = Endpoint::Parse("tcp:" + config_.preview.listen);
    if (!where) return Fail(where.error());
    std::optional<http::TlsFrontOptions> tls;
    if (config_.preview.tls()) {
      tls.emplace();
      tls->cert_file = config_.preview.tls_cert;
      tls->key_file = config_.preview.tls_key;
      if (config_.preview_tls_for_test) config_.preview_tls_for_test(*tls);
    }
    auto previews = api_->ListenPreviews(*where, std::move(tls));
    if (!previews) {
      return Fail(previews.error().code, fmt::format("preview.listen {}: {}", config_.preview.listen,
                                                     previews.error().message));
    }
    preview_endpoint_ = *previews;
    spdlog::info("previews: also on {}{}", previews->ToString(),
                 config_.preview.tls() ? fmt::format(" (TLS only, certificate {})", config_.preview.tls_cert) : "");
  }
  // The form every preview link takes (PreviewService::Url): https on berthd's own TLS.
  spdlog::info("previews: {}", previews_->UrlPattern());
  for (int i = 0; i < std::max(1, config_.io_threads); ++i) {
    io_threads_.emplace_back([this] {
      auto guard = boost::asio::make_work_guard(io_);
      io_.run();
    });
  }
  std::ofstream(config_.data_dir / "listen.addr") << url() << "\n";
  return {};
}

void Daemon::Shutdown() {
  if (stopped_) return;
  stopped_ = true;
  if (api_) api_->Stop();
  // People's control goes back to the agent, on the timeline, while the store still takes it.
  if (desktop_) desktop_->Shutdown();
  // MCP calls waiting on the service end now; calls still talking to an agent get a moment.
  mcp_calls_->Close();
  (void)mcp_calls_->WaitIdle(std::chrono::seconds(10));  // what is left is dealt with below
  if (service_) service_->Shutdown();
  io_.stop();
  for (auto& t : io_threads_) t.join();
  io_threads_.clear();
  if (mcp_pool_) {
    if (mcp_calls_->running() > 0) {
      // An agent call that did not end in 10 s: its thread is left to the process's exit
      // rather than holding shutdown up for as long as the guest takes.
      spdlog::warn("shutdown: {} MCP call(s) still running; not waiting for them", mcp_calls_->running());
      mcp_pool_->stop();
      (void)mcp_pool_.release();  // deliberately leaked: joining would wait for the guest
    } else {
      mcp_pool_->join();
    }
  }
  if (pool_) pool_->join();
}

void Daemon::WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("signal {}: shutting down (VMs keep running)", sig);
  Shutdown();
}

}  // namespace berth
