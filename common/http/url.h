// Small pieces of URL handling the servers need: percent-decoding and query strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace berth::http {

// Decodes %XX escapes ('+' stays '+': paths, not forms). Fails on a bad escape or a NUL byte.
Result<std::string> PercentDecode(std::string_view text);
// Encodes everything but unreserved characters and, if keep_slash, '/'.
std::string PercentEncode(std::string_view text, bool keep_slash = true);

class Query {
 public:
  // Parses "a=1&b=x%20y"; '+' means space here, as browsers send it.
  static Result<Query> Parse(std::string_view query);
  std::optional<std::string> Get(std::string_view key) const;
  bool Has(std::string_view key) const;
  // "1", "true", "yes" are true; absent is `fallback`.
  Result<bool> GetBool(std::string_view key, bool fallback) const;
  Result<long long> GetInt(std::string_view key, long long fallback, long long min,
                           long long max) const;
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// Splits a request target into its path and query parts.
std::pair<std::string_view, std::string_view> SplitTarget(std::string_view target);

}  // namespace berth::http
