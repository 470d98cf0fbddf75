#include "controller/network/policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace berth::network {
namespace {

using nlohmann::json;

Error Invalid(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A hostname as DNS spells it: labels of 1–63 letters, digits and '-' (not at either end),
// at least two labels (a bare "com" would allow a whole top-level domain). Underscores are
// allowed inside labels, as in "_acme-challenge" or SRV-style names.
Status ValidateHostname(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return Fail(Invalid(fmt::format("'{}' is not a host name of 1 to {} characters", name, kMaxNameBytes)));
  }
  size_t labels = 0;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    std::string_view label = name.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return Fail(Invalid(fmt::format("'{}' is not a valid host name", name)));
    }
    for (char c : label) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (!ok) return Fail(Invalid(fmt::format("'{}' is not a valid host name", name)));
    }
    ++labels;
    start = dot + 1;
  }
  if (labels < 2) {
    return Fail(Invalid(fmt::format("'{}' needs at least two labels (a name, not a top-level domain)", name)));
  }
  return {};
}

bool LooksLikeAddress(std::string_view s) {
  return s.find(':') != std::string_view::npos ||
         (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || c == '.' || c == '/';
         }));
}

void ClearHostBits(Cidr& c) {
  int width = c.v6 ? 128 : 32;
  for (int bit = c.prefix; bit < width; ++bit) {
    c.bytes[static_cast<size_t>(bit / 8)] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  }
}

}  // namespace

std::string_view EgressName(Egress egress) {
  switch (egress) {
    case Egress::kOpen: return "open";
    case Egress::kNone: return "none";
    case Egress::kAllowlist: return "allowlist";
  }
  return "open";
}

std::string Cidr::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return fmt::format("{}/{}", buf, prefix);
}

bool Cidr::Contains(const Cidr& other) const {
  if (v6 != other.v6 || other.prefix < prefix) return false;
  Cidr narrowed = other;
  narrowed.prefix = prefix;
  ClearHostBits(narrowed);
  return narrowed.bytes == bytes;
}

bool Cidr::Overlaps(const Cidr& other) const { return Contains(other) || other.Contains(*this); }

Result<Cidr> ParseCidr(std::string_view text) {
  if (text.size() > 64) return Fail(Invalid("an address or CIDR is at most 64 characters"));
  std::string addr(text);
  std::optional<int> prefix;
  if (auto slash = addr.find('/'); slash != std::string::npos) {
    std::string bits = addr.substr(slash + 1);
    addr.resize(slash);
    if (bits.empty() || bits.size() > 3 ||
        !std::all_of(bits.begin(), bits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Fail(Invalid(fmt::format("'{}' has a bad prefix length", text)));
    }
    prefix = std::stoi(bits);
  }
  Cidr c;
  if (inet_pton(AF_INET, addr.c_str(), c.bytes.data()) == 1) {
    c.v6 = false;
  } else if (inet_pton(AF_INET6, addr.c_str(), c.bytes.data()) == 1) {
    c.v6 = true;
  } else {
    return Fail(Invalid(fmt::format("'{}' is not an IPv4 or IPv6 address or CIDR", text)));
  }
  int width = c.v6 ? 128 : 32;
  c.prefix = prefix.value_or(width);
  if (c.prefix < 0 || c.prefix > width) {
    return Fail(Invalid(fmt::format("'{}': the prefix length must be 0 to {}", text, width)));
  }
  ClearHostBits(c);
  return c;
}

Result<Policy> ParsePolicy(const json& body) {
  if (!body.is_object()) return Fail(Invalid("'network' must be an object {\"egress\": ..., \"allow\": [...]}"));
  for (const auto& [k, v] : body.items()) {
    if (k != "egress" && k != "allow") {
      return Fail(Invalid(fmt::format("unknown field 'network.{}' (egress, allow)", k)));
    }
  }
  Policy p;
  if (body.contains("egress")) {
    const auto& e = body["egress"];
    if (e == "open") p.egress = Egress::kOpen;
    else if (e == "none") p.egress = Egress::kNone;
    else if (e == "allowlist") p.egress = Egress::kAllowlist;
    else return Fail(Invalid("'network.egress' must be \"open\", \"none\" or \"allowlist\""));
  } else if (body.contains("allow")) {
    p.egress = Egress::kAllowlist;  // an allow list alone means what it says
  }
  if (!body.contains("allow")) return p;
  const auto& allow = body["allow"];
  if (!allow.is_array()) return Fail(Invalid("'network.allow' must be an array of names and CIDRs"));
  if (allow.size() > kMaxAllowEntries) {
    return Fail(Invalid(fmt::format("'network.allow' has more than {} entries", kMaxAllowEntries)));
  }
  if (!allow.empty() && p.egress != Egress::kAllowlist) {
    return Fail(Invalid(fmt::format("'network.allow' is only for egress \"allowlist\" (egress is \"{}\")",
                                    EgressName(p.egress))));
  }
  std::set<std::string> names;
  for (const auto& entry : allow) {
    if (!entry.is_string()) return Fail(Invalid("'network.allow' entries must be strings"));
    const auto& raw = entry.get_ref<const std::string&>();
    if (raw.empty() || raw.size() > kMaxNameBytes + 2) {
      return Fail(Invalid(fmt::format("'network.allow' entries are 1 to {} characters", kMaxNameBytes)));
    }
    std::string text = Lower(raw);
    if (text.back() == '.') text.pop_back();
    if (LooksLikeAddress(text)) {
      auto cidr = ParseCidr(text);
      if (!cidr) return Fail(cidr.error());
      if (std::find(p.cidrs.begin(), p.cidrs.end(), *cidr) == p.cidrs.end()) p.cidrs.push_back(*cidr);
      continue;
    }
    std::string_view host = text;
    if (host.starts_with("*.")) host.remove_prefix(2);
    if (host.find('*') != std::string_view::npos) {
      return Fail(Invalid(fmt::format("'{}': a wildcard is only allowed as a leading \"*.\"", raw)));
    }
    if (auto s = ValidateHostname(host); !s) return Fail(s.error());
    if (names.insert(text).second) p.names.push_back(text);
  }
  if (p.names.empty() && p.cidrs.empty() && !allow.empty()) {
    return Fail(Invalid("'network.allow' has no usable entry"));
  }
  return p;
}

json PolicyJson(const Policy& policy) {
  json allow = json::array();
  for (const auto& n : policy.names) allow.push_back(n);
  for (const auto& c : policy.cidrs) allow.push_back(c.ToString());
  return {{"egress", EgressName(policy.egress)}, {"allow", allow}};
}

bool NameAllowed(const Policy& policy, std::string_view raw) {
  switch (policy.egress) {
    case Egress::kOpen: return true;
    case Egress::kNone: return false;
    case Egress::kAllowlist: break;
  }
  if (raw.size() > kMaxNameBytes + 1) return false;
  std::string name = Lower(raw);
  if (!name.empty() && name.back() == '.') name.pop_back();
  for (const auto& entry : policy.names) {
    if (entry.starts_with("*.")) {
      std::string_view suffix = std::string_view(entry).substr(1);  // ".pypi.org"
      if (name.size() > suffix.size() && name.ends_with(suffix)) return true;
    } else if (name == entry) {
      return true;
    }
  }
  return false;
}

}  // namespace berth::network
