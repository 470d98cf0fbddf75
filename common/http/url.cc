#include "common/http/url.h"

#include <charconv>

#include <fmt/format.h>

namespace berth::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> Decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) {
        return Fail(ErrorCode::kInvalidArgument, "truncated percent escape");
      }
      int hi = HexValue(text[i + 1]);
      int lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return Fail(ErrorCode::kInvalidArgument, "bad percent escape");
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return Fail(ErrorCode::kInvalidArgument, "NUL byte in URL");
    out.push_back(c);
  }
  return out;
}

}  // namespace

Result<std::string> PercentDecode(std::string_view text) { return Decode(text, false); }

std::string PercentEncode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/');
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Result<Query> Query::Parse(std::string_view query) {
  Query q;
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    auto key = Decode(part.substr(0, eq), true);
    if (!key) return Fail(key.error());
    auto value = Decode(eq == std::string_view::npos ? "" : part.substr(eq + 1), true);
    if (!value) return Fail(value.error());
    q.items_.emplace_back(std::move(*key), std::move(*value));
  }
  return q;
}

std::optional<std::string> Query::Get(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k == key) return v;
  }
  return std::nullopt;
}

bool Query::Has(std::string_view key) const { return Get(key).has_value(); }

Result<bool> Query::GetBool(std::string_view key, bool fallback) const {
  auto v = Get(key);
  if (!v) return fallback;
  if (*v == "" || *v == "1" || *v == "true" || *v == "yes") return true;
  if (*v == "0" || *v == "false" || *v == "no") return false;
  return Fail(ErrorCode::kInvalidArgument, fmt::format("query parameter '{}' is not a boolean", key));
}

Result<long long> Query::GetInt(std::string_view key, long long fallback, long long min,
                                long long max) const {
  auto v = Get(key);
  if (!v) return fallback;
  long long out = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || ptr != v->data() + v->size() || out < min || out > max) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("query parameter '{}' must be an integer in [{}, {}]", key, min, max));
  }
  return out;
}

std::pair<std::string_view, std::string_view> SplitTarget(std::string_view target) {
  auto q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

}  // namespace berth::http
