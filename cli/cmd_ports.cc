// Ports in a workspace: list them (with their preview URLs) and forward one to this machine.
// Preview links are cmd_previews.cc.
#include <charconv>
#include <csignal>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "common/client/ports.h"
#include "common/client/tunnel.h"

namespace berth::cli {
namespace {

Result<int> ListPorts(Context& ctx, const std::string& workspace) {
  // Listing ports does not wake a stopped workspace: nothing listens in it.
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto deadline = DeadlineIn(std::chrono::seconds(120));
  auto ws = berth->GetWorkspace(workspace, deadline);
  if (!ws) return Fail(ws.error());
  std::vector<protocol::PortInfo> ports;
  if (ws->state == v1::State::kRunning) {
    auto agent = berth->Agent(ws->id, deadline);
    auto listed = client::ListPorts(agent.client, agent.scope);
    if (!listed) return Fail(listed.error());
    ports = std::move(*listed);
  } else if (!ctx.json()) {
    ctx.Note(fmt::format("{} is {}: nothing listens in it", workspace, v1::StateName(ws->state)));
  }
  if (ctx.json()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : ports) out.push_back(protocol::ToJson(p));
    ctx.PrintJson(out);
    return kExitOk;
  }
  if (ports.empty()) return kExitOk;
  Table table({"PORT", "ADDRESS", "PID", "PROCESS", "USER", "PREVIEW", "COMMAND"});
  for (const auto& p : ports) {
    table.AddRow({std::to_string(p.port), p.address, p.pid ? std::to_string(*p.pid) : "-",
                  p.process.value_or("-"), p.user.value_or("-"), p.preview_url.value_or("-"),
                  p.cmdline.value_or("-")});
  }
  ctx.out() << table.Render();
  return kExitOk;
}

struct ForwardOptions {
  std::string workspace;
  std::string ports;  // [LOCAL:]REMOTE
  std::string address = "127.0.0.1";
};

Result<std::pair<uint16_t, uint16_t>> ParsePortPair(const std::string& text) {
  auto parse = [&](std::string_view part, bool zero_ok) -> Result<uint16_t> {
    int value = -1;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec != std::errc() || end != part.data() + part.size() || value < (zero_ok ? 0 : 1) ||
        value > 65535) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("bad port '{}' in '{}' (expected [LOCAL:]REMOTE)", part, text));
    }
    return static_cast<uint16_t>(value);
  };
  auto colon = text.find(':');
  std::string_view remote_text = colon == std::string::npos
                                     ? std::string_view(text)
                                     : std::string_view(text).substr(colon + 1);
  auto remote = parse(remote_text, false);
  if (!remote) return Fail(remote.error());
  uint16_t local = *remote;
  if (colon != std::string::npos) {
    auto parsed = parse(std::string_view(text).substr(0, colon), true);
    if (!parsed) return Fail(parsed.error());
    local = *parsed;
  }
  return std::make_pair(local, *remote);
}

Result<int> Forward(Context& ctx, const ForwardOptions& o) {
  auto ports = ParsePortPair(o.ports);
  if (!ports) return Fail(ports.error());
  auto agent = ctx.Connect(o.workspace);
  if (!agent) return Fail(agent.error());
  // Blocked before the forwarder's threads start, so that only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  tunnel::PortForwarder::Options options;
  options.listen_host = o.address;
  options.listen_port = ports->first;
  auto forwarder = tunnel::PortForwarder::Start(std::move(agent->client), std::move(agent->scope),
                                                ports->second, options);
  if (!forwarder) return Fail(forwarder.error());
  ctx.out() << fmt::format("forwarding {}:{} -> {}:{} (Ctrl-C to stop)\n", o.address,
                           (*forwarder)->local_port(), o.workspace, ports->second)
            << std::flush;
  int signo = 0;
  sigwait(&stop_signals, &signo);
  (*forwarder)->Stop();
  return kExitOk;
}

}  // namespace

void AddPortCommands(Builder& b) {
  auto ws = std::make_shared<std::string>();
  auto* ports = b.Add("ports", "list the TCP ports listening in a workspace",
                      [ws](Context& ctx) { return ListPorts(ctx, *ws); });
  ports->add_option("workspace", *ws, "workspace id or name")->required();
  b.AddJsonFlag(ports);

  auto f = std::make_shared<ForwardOptions>();
  auto* forward = b.Add("port-forward", "forward a local TCP port to a port in a workspace",
                        [f](Context& ctx) { return Forward(ctx, *f); });
  forward->add_option("workspace", f->workspace, "workspace id or name")->required();
  forward->add_option("ports", f->ports, "[LOCAL:]REMOTE, e.g. 8080 or 9000:8080 (0: any)")
      ->required();
  forward->add_option("--address", f->address, "local address to listen on")
      ->capture_default_str();
}

}  // namespace berth::cli
