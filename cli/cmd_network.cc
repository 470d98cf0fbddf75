// `berth network WS [--egress open|none|allowlist] [--allow NAME|CIDR]...`: shows a workspace's
// guest network (policy, isolation, refusals) or sets its egress policy, which applies to the
// running guest at once (GET|PATCH /v1/workspaces/{ws}/network).
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/context.h"
#include "common/deadline.h"
#include "cli/exit_codes.h"
#include "cli/output.h"

namespace berth::cli {
namespace {


struct NetworkOptions {
  std::string workspace;
  std::string egress;
  std::vector<std::string> allow;
  bool clear_allow = false;
};

std::string Join(const nlohmann::json& list) {
  std::string out;
  if (!list.is_array()) return out;
  for (const auto& v : list) {
    if (!v.is_string()) continue;
    if (!out.empty()) out += ", ";
    out += v.get<std::string>();
  }
  return out;
}

void Print(Context& ctx, const nlohmann::json& n) {
  auto& out = ctx.out();
  const auto& c = n.value("counters", nlohmann::json::object());
  out << fmt::format("egress:    {}\n", n.value("egress", "?"));
  if (n.value("egress", "") == "allowlist") out << fmt::format("allow:     {}\n", Join(n.value("allow", nlohmann::json::array())));
  out << fmt::format("isolated:  {}\n", n.value("isolated", false) ? "yes" : "NO (network.isolation is off on this host)");
  out << fmt::format("refused:   {} packets, {} names\n", c.value("refused_packets", 0), c.value("refused_names", 0));
  out << fmt::format("allowed:   {} packets, {} bytes; {} names answered\n", c.value("allowed_packets", 0),
                     c.value("allowed_bytes", 0), c.value("answered_names", 0));
  const auto& refused = n.value("refused", nlohmann::json::array());
  const auto& names = n.value("refused_names", nlohmann::json::array());
  if (refused.empty() && names.empty()) return;
  out << "recent refusals:\n";
  for (const auto& r : refused) {
    std::string addr = r.value("address", "?");
    if (addr.find(':') != std::string::npos) addr = "[" + addr + "]";
    out << fmt::format("  {}  {}:{}\n", r.value("at", "?"), addr, r.value("port", 0));
  }
  for (const auto& r : names) out << fmt::format("  {}  name {}\n", r.value("at", "?"), r.value("name", "?"));
}

Result<int> Network(Context& ctx, const NetworkOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto deadline = DeadlineIn(std::chrono::seconds(60));
  Result<nlohmann::json> answer = Fail(ErrorCode::kInternal, "no request");
  if (o.egress.empty() && o.allow.empty() && !o.clear_allow) {
    answer = berth->GetNetwork(o.workspace, deadline);
  } else {
    v1::NetworkPolicy policy;
    // --allow alone means an allowlist; --egress open|none with --allow is refused by berthd.
    policy.egress = o.egress.empty() ? "allowlist" : o.egress;
    policy.allow = o.allow;
    answer = berth->SetNetwork(o.workspace, policy, deadline);
  }
  if (!answer) return Fail(answer.error());
  if (ctx.json()) {
    ctx.PrintJson(*answer);
  } else {
    Print(ctx, *answer);
  }
  return kExitOk;
}

}  // namespace

void AddNetworkCommands(Builder& b) {
  auto o = std::make_shared<NetworkOptions>();
  auto* sub = b.Add("network",
                    "show a workspace's guest network, or set its egress policy (applies at once)",
                    [o](Context& ctx) { return Network(ctx, *o); });
  sub->add_option("workspace", o->workspace, "workspace id or name")->required();
  sub->add_option("--egress", o->egress, "open (the internet, never the host), none, or allowlist")
      ->check(CLI::IsMember({"open", "none", "allowlist"}));
  sub->add_option("--allow", o->allow,
                  "an allowed name (exact, or *.domain for its subdomains) or CIDR; repeat it. "
                  "Replaces the whole list")
      ->take_all();
  sub->add_flag("--clear-allow", o->clear_allow, "set the allowlist to nothing (with --egress allowlist: no egress)");
  b.AddJsonFlag(sub);
}

}  // namespace berth::cli
