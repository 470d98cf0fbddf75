#include "controller/network/firewall.h"

#include <algorithm>

#include <fmt/format.h>

namespace berth::network {
namespace {

std::string Table() { return fmt::format("{} {}", kTableFamily, kTableName); }

// nft's JSON is {"nftables": [{"metainfo": ...}, {"<kind>": {...}}, ...]}.
template <class F>
void ForEachObject(const nlohmann::json& j, const char* kind, F fn) {
  if (!j.contains("nftables") || !j["nftables"].is_array()) return;
  for (const auto& item : j["nftables"]) {
    if (item.is_object() && item.contains(kind) && item[kind].is_object()) fn(item[kind]);
  }
}

uint64_t U64(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<uint64_t>() : 0;
}

}  // namespace

Result<std::unique_ptr<Firewall>> Firewall::Install(const UidRange& range, const std::vector<Cidr>& open_cidrs) {
  auto nft = Nft::Open();
  if (!nft) return Fail(nft.error());
  if (auto s = (*nft)->Run(InstallBatch(range, open_cidrs)); !s) {
    return Fail(ErrorCode::kUnavailable,
                fmt::format("cannot install the nftables table '{}' for guest network isolation ({}); "
                            "berthd needs root and nftables (or set network.isolation to false)",
                            Table(), s.error().message));
  }
  return std::unique_ptr<Firewall>(new Firewall(std::move(*nft)));
}

Result<bool> Firewall::RemoveTable() {
  auto nft = Nft::Open();
  if (!nft) return Fail(nft.error());
  auto listed = (*nft)->Json(fmt::format("list tables {}", kTableFamily));
  if (!listed) return Fail(listed.error());
  bool present = false;
  ForEachObject(*listed, "table", [&](const nlohmann::json& t) { present = present || t.value("name", "") == kTableName; });
  if (!present) return false;
  if (auto s = (*nft)->Run(fmt::format("delete table {}\n", Table())); !s) return Fail(s.error());
  return true;
}

Status Firewall::Apply(const WorkspaceRules& rules) { return nft_->Run(WorkspaceBatch(rules)); }

Status Firewall::Remove(uid_t uid, const std::string& resolver) {
  return nft_->Run(RemoveWorkspaceBatch(uid, resolver));
}

Status Firewall::AddResolved(uid_t uid, const std::vector<std::string>& v4, const std::vector<std::string>& v6,
                             int ttl_s) {
  std::string batch = ResolvedBatch(uid, v4, v6, ttl_s);
  if (batch.empty()) return {};
  return nft_->Run(batch);
}

Result<std::vector<uid_t>> Firewall::WorkspaceUids() {
  auto j = nft_->Json(fmt::format("list chains {}", kTableFamily));
  if (!j) return Fail(j.error());
  std::vector<uid_t> out;
  ForEachObject(*j, "chain", [&](const nlohmann::json& c) {
    if (c.value("table", "") != kTableName) return;
    std::string name = c.value("name", "");
    if (name.size() < 2 || name[0] != 'w') return;
    std::string digits = name.substr(1);
    if (!std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) return;
    if (digits.size() > 10) return;
    out.push_back(static_cast<uid_t>(std::stoull(digits)));
  });
  return out;
}

Result<FirewallCounters> Firewall::Counters(uid_t uid) {
  FirewallCounters out;
  std::string w = WorkspaceChain(uid);
  for (const char* which : {"refused", "allowed"}) {
    auto j = nft_->Json(fmt::format("list counter {} {}_{}", Table(), w, which));
    if (!j) return Fail(j.error());
    ForEachObject(*j, "counter", [&](const nlohmann::json& c) {
      if (std::string_view(which) == "refused") {
        out.refused_packets = U64(c, "packets");
        out.refused_bytes = U64(c, "bytes");
      } else {
        out.allowed_packets = U64(c, "packets");
        out.allowed_bytes = U64(c, "bytes");
      }
    });
  }
  return out;
}

Result<std::vector<RefusedDestination>> Firewall::Refused(uid_t uid, int64_t now) {
  std::vector<RefusedDestination> out;
  std::string w = WorkspaceChain(uid);
  for (const char* family : {"seen4", "seen6"}) {
    auto j = nft_->Json(fmt::format("list set {} {}_{}", Table(), w, family));
    if (!j) return Fail(j.error());
    ForEachObject(*j, "set", [&](const nlohmann::json& set) {
      if (!set.contains("elem") || !set["elem"].is_array()) return;
      for (const auto& e : set["elem"]) {
        // {"elem": {"val": {"concat": ["198.51.100.1", 8080]}, "timeout": 3600, "expires": 3590}}
        if (!e.is_object() || !e.contains("elem")) continue;
        const auto& elem = e["elem"];
        if (!elem.contains("val") || !elem["val"].contains("concat")) continue;
        const auto& concat = elem["val"]["concat"];
        if (!concat.is_array() || concat.size() != 2 || !concat[0].is_string()) continue;
        RefusedDestination d;
        d.address = concat[0].get<std::string>();
        d.port = concat[1].is_number_unsigned() ? concat[1].get<uint16_t>() : 0;
        int64_t timeout = elem.value("timeout", static_cast<int64_t>(kSeenTimeoutS));
        int64_t expires = elem.value("expires", timeout);
        d.at = now - std::max<int64_t>(0, timeout - expires);
        out.push_back(std::move(d));
      }
    });
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.at > b.at; });
  return out;
}

Result<std::string> Firewall::ListTableForTest() {
  auto j = nft_->Json(fmt::format("list table {}", Table()));
  if (!j) return Fail(j.error());
  return j->dump();
}

}  // namespace berth::network
