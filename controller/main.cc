// berthd: flags -> Config -> Daemon. Everything else is in the controller library.
#include <signal.h>

#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "controller/berthd.h"
#include "controller/hypervisor/domain_spec_json.h"

namespace {

// `berthd domain-xml`: a JSON DomainSpec on stdin, the domain XML berthd would define on
// stdout. images/lib/vm.sh boots images through it, so the image checks test berthd's devices.
int PrintDomainXml() {
  // Read at most 1 MiB (and one byte to tell it was more), not all of stdin then check.
  constexpr size_t kMaxSpec = 1 << 20;
  std::string text(kMaxSpec + 1, '\0');
  std::cin.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(std::cin.gcount()));
  if (text.size() > kMaxSpec) {
    std::cerr << "berthd domain-xml: the spec is over 1 MiB\n";
    return 2;
  }
  auto j = berth::ParseJson(text);
  if (!j) {
    std::cerr << "berthd domain-xml: " << j.error().message << "\n";
    return 2;
  }
  auto spec = berth::hypervisor::DomainSpecFromJson(*j);
  if (!spec) {
    std::cerr << "berthd domain-xml: " << spec.error().message << "\n";
    return 2;
  }
  std::cout << berth::hypervisor::RenderDomainXml(*spec);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Signals are taken synchronously by WaitForSignal; every thread inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{"berthd: the Berth controller (workspaces as VMs, the v1 API)"};
  berth::Config config;
  std::string config_file, listen, data, uri, transport, accel, agent_bin, agent_user, log_level, web_root;
  int idle_poll_ms = 0, boot_timeout_s = 0;
  app.add_option("--config", config_file, "JSON config file (flags win over it)");
  app.add_option("--listen", listen, "HOST:PORT or unix:PATH (default 127.0.0.1:8420)");
  app.add_option("--data", data, "state directory (default /var/lib/berth)");
  app.add_option("--libvirt-uri", uri, "libvirt connection (default qemu:///system)");
  app.add_option("--transport", transport, "auto|vsock|forward|unix (unix: tests, no VMs)");
  app.add_option("--accel", accel, "auto|kvm|tcg");
  app.add_option("--agent-bin", agent_bin, "berth-agent binary for the unix transport");
  app.add_option("--agent-user", agent_user, "default user of host agents (unix transport)");
  app.add_option("--idle-poll-ms", idle_poll_ms, "how often the idle loop runs");
  app.add_option("--boot-timeout", boot_timeout_s, "seconds before a silent boot is retried");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  app.add_option("--web-root", web_root, "the built web UI (web/dist), served under /");
  bool version = false;
  app.add_flag("--version", version, "print the version and exit");
  auto* domain_xml = app.add_subcommand(
      "domain-xml", "print the libvirt domain XML for a JSON domain spec read from stdin");
  CLI11_PARSE(app, argc, argv);
  if (domain_xml->parsed()) return PrintDomainXml();
  if (version) {
    std::cout << "berthd " << BERTH_VERSION << "\n";
    return 0;
  }
  if (!config_file.empty()) {
    if (auto s = config.LoadFile(config_file); !s) {
      std::cerr << "berthd: " << s.error().message << "\n";
      return 2;
    }
  }
  if (!listen.empty()) config.listen = listen;
  if (!data.empty()) config.data_dir = data;
  if (!uri.empty()) config.libvirt_uri = uri;
  if (!transport.empty()) config.transport = transport;
  if (!accel.empty()) config.accel = accel;
  if (!agent_bin.empty()) config.agent_binary = agent_bin;
  if (!agent_user.empty()) config.agent_user = agent_user;
  if (idle_poll_ms > 0) config.idle_poll_ms = idle_poll_ms;
  if (boot_timeout_s > 0) config.boot_timeout_s = boot_timeout_s;
  if (!log_level.empty()) config.log_level = log_level;
  if (!web_root.empty()) config.web_root = web_root;
  spdlog::set_level(spdlog::level::from_str(config.log_level));

  berth::Daemon daemon(config);
  if (auto s = daemon.Start(); !s) {
    std::cerr << "berthd: " << s.error().message << "\n";
    return 1;
  }
  std::cout << "listening on " << daemon.url() << std::endl;
  std::cout << "operator key: " << daemon.admin_key_file().string() << std::endl;
  daemon.WaitForSignal();
  return 0;
}
