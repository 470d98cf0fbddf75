#include "common/duration.h"

#include <charconv>

#include <fmt/format.h>

namespace berth {

Result<std::chrono::seconds> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("bad duration '{}' (examples: 90, 90s, 30m, 1h30m, 2d)", text));
  };
  if (text.empty()) return bad();
  const int64_t max = kMaxParsedDuration.count();
  int64_t total = 0;
  bool any_unit = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    if (digits == 0) return bad();
    int64_t n = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + digits, n);
    if (ec != std::errc() || n > max) return bad();
    rest.remove_prefix(digits);
    int64_t unit = 1;
    if (rest.empty()) {
      if (any_unit) return bad();  // "1h30" is ambiguous
    } else {
      switch (rest.front()) {
        case 's': unit = 1; break;
        case 'm': unit = 60; break;
        case 'h': unit = 3600; break;
        case 'd': unit = 86400; break;
        case 'w': unit = 7 * 86400; break;
        default: return bad();
      }
      rest.remove_prefix(1);
      any_unit = true;
    }
    // n <= max and unit <= 604800: the product fits, and so does the sum before the check.
    if (n > (max - total) / unit) return bad();
    total += n * unit;
  }
  return std::chrono::seconds(total);
}

std::string FormatDuration(std::chrono::seconds duration) {
  int64_t seconds = duration.count();
  if (seconds < 0) return "-";
  if (seconds < 60) return fmt::format("{}s", seconds);
  int64_t d = seconds / 86400, h = seconds % 86400 / 3600, m = seconds % 3600 / 60,
          s = seconds % 60;
  std::string out;
  if (d > 0) out += fmt::format("{}d", d);
  if (h > 0) out += fmt::format("{}h", h);
  if (m > 0 && d == 0) out += fmt::format("{}m", m);
  if (s > 0 && d == 0 && h == 0) out += fmt::format("{}s", s);
  return out;
}

}  // namespace berth
