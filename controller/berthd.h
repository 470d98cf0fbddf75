// berthd as a library: the configuration, the wiring (store, hypervisor, transport, workspace
// service, HTTP API) and its lifetime. main.cc parses flags into a Config and calls Run();
// integration tests start a Daemon in-process on port 0.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/http/tls_front.h"
#include "controller/api/sessions.h"
#include "controller/desktop/desktop_service.h"
#include "controller/network/network_config.h"
#include "controller/preview/preview_config.h"
#include "controller/preview/preview_service.h"
#include "controller/workspace/host_disk.h"
#include "controller/workspace/quota.h"
#include "common/unique.h"

namespace berth {

namespace store { class Store; }
namespace hypervisor { class Hypervisor; }
namespace workspace { class WorkspaceService; }
namespace api { class ApiServer; class Authenticator; struct McpCalls; }
namespace mcp { class McpHttpContext; }
namespace network { class NetworkManager; }

struct Config {
  std::string listen = "127.0.0.1:8420";  // loopback by default: put a TLS proxy in front
  std::filesystem::path data_dir = "/var/lib/berth";
  std::filesystem::path images_dir;        // default <data>/images
  std::string libvirt_uri = "qemu:///system";
  std::string transport = "auto";          // auto | vsock | forward | unix (tests)
  std::string accel = "auto";              // auto | kvm | tcg
  std::string agent_binary;                // unix transport: the berth-agent to run
  std::string agent_user;                  // unix transport: its default user
  int max_concurrent_boots = 2;
  int boot_timeout_s = 0;                  // 0: by accelerator (see ServiceOptions)
  int stop_grace_s = 45;
  int idle_poll_ms = 5000;
  int reconcile_every_s = 60;
  int image_gc_every_s = 3600;             // 0: keep every image version
  // Each workspace's timeline keeps its newest this many events (at least 100).
  int64_t events_kept = store::kDefaultEventsKept;
  int io_threads = 2;                      // the host has few cores; I/O is not the bottleneck
  std::string log_level = "info";
  // Connection caps (common/http/server.h). The total bounds berthd's memory (an idle
  // connection costs a few KiB); at it, connections that never authenticated are shed first,
  // so the total is no lever for a client without a key.
  int max_connections = 1024;
  // Per source address: one host cannot take the total. Behind a reverse proxy on the same
  // host every client is one address (the proxy's), so it is generous; 0: no cap.
  int max_connections_per_source = 512;
  // Per API key: one tenant's runaway client cannot take the total. Event streams, exec
  // sessions and tunnels each hold a connection for as long as they run; 0: no cap.
  int max_connections_per_key = 256;
  // A connection that has not yet sent an authenticated request gets this long, in total, for
  // each request head (a silent or slowloris socket holds its slot no longer); after one, the
  // keep-alive idle timeout applies. Bodies keep their own deadlines.
  int unauthenticated_header_timeout_s = 10;
  // Guest network isolation ("network": {...}, controller/network/network_config.h). On by
  // default; the unix transport (tests: no guests) never installs rules.
  network::NetworkConfig network;
  // Previews ("preview": {...}, controller/preview/preview_config.h): at
  // http://{port}-{workspace}.preview.localhost:<listen port>/ by default; on https from
  // preview.listen with preview.tls_cert and tls_key.
  preview::PreviewConfig preview;
  // Tests: changes the preview TLS front's options (a short handshake deadline, a certificate
  // re-read on every connection) before it starts.
  std::function<void(http::TlsFrontOptions&)> preview_tls_for_test;
  // The desktop ("desktop": {...}, controller/desktop/desktop_service.h): takeover lease,
  // viewer grace, allowed browser origins.
  desktop::DesktopConfig desktop;
  // The web UI: its built files (web/dist; empty: "/" says it was not built), and its sign-in
  // sessions ("sessions": {"idle_timeout_s", "max_age_s"}, controller/api/sessions.h).
  std::filesystem::path web_root;
  api::SessionOptions sessions;
  // Every tenant's limits unless the operator set its own (PATCH /v1/tenants/{id}):
  // "limits": {"workspaces": 50, "vcpus": 16, "memory_mib": 32768, "disk_gib": 2048}.
  workspace::Limits limits;
  // Creates are refused while the data directory's file system has less free than either:
  // "min_free_disk": {"bytes": 5368709120, "percent": 5}.
  workspace::DiskFloor min_free_disk;
  // The free space of the data directory; statvfs unless a test injects its own.
  workspace::HostDiskSource host_disk_for_test;

  // Reads a JSON config file; keys as the fields above ("listen", "data_dir", ...). Flags
  // given on the command line win over the file (the caller applies them after).
  Status LoadFile(const std::filesystem::path& path);
};

class Daemon {
 public:
  explicit Daemon(Config config);
  ~Daemon();

  // Opens the store (creating the first tenant and the operator key on first start, and a new
  // operator key whenever none is active), connects to libvirt, reconciles, and starts
  // serving. Returns once listening.
  Status Start();
  // berthd shuts down: stops serving and the background loops. VMs keep running, and the next
  // berthd takes them over. Idempotent.
  void Shutdown();
  // Blocks until SIGTERM or SIGINT, then Shutdown().
  void WaitForSignal();

  const Endpoint& endpoint() const { return endpoint_; }
  // The preview listener (preview.listen); port 0 when there is none.
  const Endpoint& preview_endpoint() const { return preview_endpoint_; }
  std::string url() const;
  std::filesystem::path admin_key_file() const { return config_.data_dir / "admin.key"; }
  workspace::WorkspaceService& service() { return *service_; }
  store::Store& store() { return *store_; }
  desktop::DesktopService& desktop() { return *desktop_; }

 private:
  Status EnsureOperatorKey();

  Config config_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<hypervisor::Hypervisor> hypervisor_;
  std::unique_ptr<network::NetworkManager> network_;
  std::unique_ptr<workspace::WorkspaceService> service_;
  std::unique_ptr<api::Authenticator> auth_;
  // Preview grants and links: the API's routes, the gateway and MCP's in-process backend.
  std::unique_ptr<preview::PreviewService> previews_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::thread_pool> pool_;
  // MCP tool calls block a thread for as long as they run (an exec for up to an hour): a pool
  // of their own, so they never hold up the API's short blocking calls.
  std::unique_ptr<boost::asio::thread_pool> mcp_pool_;
  std::shared_ptr<api::McpCalls> mcp_calls_;
  std::unique_ptr<mcp::McpHttpContext> mcp_;
  // After io_ and pool_: destroyed before them (its timer is on io_, its recorder on pool_).
  std::unique_ptr<desktop::DesktopService> desktop_;
  std::unique_ptr<api::ApiServer> api_;
  std::vector<std::thread> io_threads_;
  Endpoint endpoint_;
  Endpoint preview_endpoint_;
  bool stopped_ = false;
  // Held while berthd runs VMs (LockHost in berthd.cc): one such berthd per host.
  UniqueFd host_lock_;
};

}  // namespace berth
