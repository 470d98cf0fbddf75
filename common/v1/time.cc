#include "common/v1/time.h"

#include <charconv>
#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "common/protocol/ports.h"

namespace berth::v1 {
namespace {

// 1970 to 2200: a time point in nanoseconds (system_clock's, which FormatTime goes through)
// overflows past 2262 (the fuzzer found it).
constexpr int64_t kLatest = 7'258'118'400;  // 2200-01-01T00:00:00Z

bool Digits(std::string_view text, int& out) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// The date and time part; `zone_optional` lets "2026-01-31T12:00:00" through as UTC.
Result<int64_t> Parse(std::string_view text, bool zone_optional) {
  auto bad = [&] {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("'{}' is not a time (ISO 8601 UTC like 2026-01-31T12:00:00Z)",
                            text.substr(0, 64)));
  };
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' || text[10] != 'T' ||
      text[13] != ':' || text[16] != ':') {
    return bad();
  }
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!Digits(text.substr(0, 4), year) || !Digits(text.substr(5, 2), month) ||
      !Digits(text.substr(8, 2), day) || !Digits(text.substr(11, 2), hour) ||
      !Digits(text.substr(14, 2), minute) || !Digits(text.substr(17, 2), second)) {
    return bad();
  }
  std::string_view rest = text.substr(19);
  if (!rest.empty() && rest[0] == '.') {
    size_t i = 1;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
    if (i == 1) return bad();
    rest.remove_prefix(i);
  }
  bool zone_ok = rest == "Z" || rest == "+00:00" || (zone_optional && rest.empty());
  if (!zone_ok) return bad();
  // Checked with the calendar: 2026-02-30 is no date.
  std::chrono::year_month_day date{std::chrono::year(year), std::chrono::month(month),
                                   std::chrono::day(day)};
  if (year < 1970 || year >= 2200 || !date.ok() || hour > 23 || minute > 59 || second > 60) return bad();
  auto days = std::chrono::sys_days(date).time_since_epoch().count();
  return static_cast<int64_t>(days) * 86400 + hour * 3600 + minute * 60 + second;
}

}  // namespace

std::string FormatTime(int64_t unix_seconds) {
  return protocol::Iso8601(
      std::chrono::system_clock::time_point(std::chrono::seconds(unix_seconds)));
}

nlohmann::json TimeOrNull(const std::optional<int64_t>& unix_seconds) {
  return unix_seconds ? nlohmann::json(FormatTime(*unix_seconds)) : nlohmann::json(nullptr);
}

Result<int64_t> ParseTime(std::string_view text) { return Parse(text, false); }

Result<int64_t> ParseTimeArgument(std::string_view text) {
  if (!text.empty() && text.size() <= 12 &&
      text.find_first_not_of("0123456789") == std::string_view::npos) {
    int64_t value = 0;
    std::from_chars(text.data(), text.data() + text.size(), value);
    if (value > kLatest) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("'{}' is outside 1970-01-01 to 2200-01-01", text));
    }
    return value;
  }
  auto parsed = Parse(text, true);
  if (!parsed) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("'{}' is not a time (ISO 8601 UTC like 2026-01-31T12:00:00Z, or "
                            "unix seconds)",
                            text.substr(0, 64)));
  }
  return parsed;
}

}  // namespace berth::v1
