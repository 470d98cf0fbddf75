#include "cli/output.h"

#include <charconv>
#include <ctime>

#include <fmt/format.h>

#include "common/json.h"

namespace berth::cli {
namespace {

size_t DisplayWidth(std::string_view text) {
  size_t n = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++n;  // count lead bytes only
  }
  return n;
}

bool ParseDigits(std::string_view text, int& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string Table::Render() const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], DisplayWidth(row[i]));
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      std::string_view cell = i < row.size() ? std::string_view(row[i]) : std::string_view();
      line += cell;
      if (i + 1 < widths.size()) line.append(widths[i] - DisplayWidth(cell) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
  return out;
}

std::optional<std::chrono::system_clock::time_point> ParseIsoTime(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+00:00)
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != ' ') || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!ParseDigits(text.substr(0, 4), year) || !ParseDigits(text.substr(5, 2), month) ||
      !ParseDigits(text.substr(8, 2), day) || !ParseDigits(text.substr(11, 2), hour) ||
      !ParseDigits(text.substr(14, 2), minute) || !ParseDigits(text.substr(17, 2), second)) {
    return std::nullopt;
  }
  std::string_view rest = text.substr(19);
  if (!rest.empty() && rest[0] == '.') {
    size_t i = 1;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
    rest.remove_prefix(i);
  }
  if (rest != "Z" && rest != "+00:00") return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  time_t t = timegm(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t);
}

std::string FormatAge(std::string_view iso_time, std::chrono::system_clock::time_point now) {
  auto t = ParseIsoTime(iso_time);
  if (!t) return "-";
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - *t).count();
  if (secs < -60) return "-";
  if (secs < 0) secs = 0;
  if (secs < 60) return fmt::format("{}s", secs);
  if (secs < 3600) return fmt::format("{}m", secs / 60);
  if (secs < 86400) return fmt::format("{}h", secs / 3600);
  if (secs < 14 * 86400) return fmt::format("{}d", secs / 86400);
  return fmt::format("{}w", secs / (7 * 86400));
}

std::string FormatDuration(int64_t seconds) {
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

Result<int64_t> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("bad duration '{}' (examples: 90, 90s, 30m, 1h30m, 2d)", text));
  };
  if (text.empty()) return bad();
  int64_t total = 0;
  std::string_view rest = text;
  bool any_unit = false;
  while (!rest.empty()) {
    size_t i = 0;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
    if (i == 0) return bad();
    int64_t n = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + i, n);
    if (ec != std::errc() || n > 100'000'000) return bad();
    rest.remove_prefix(i);
    if (rest.empty()) {
      if (any_unit) return bad();  // "1h30" is ambiguous
      total += n;
      break;
    }
    int64_t unit = 0;
    switch (rest[0]) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      case 'w': unit = 7 * 86400; break;
      default: return bad();
    }
    rest.remove_prefix(1);
    any_unit = true;
    total += n * unit;
  }
  return total;
}

Result<std::pair<std::string, std::string>> SplitKeyValue(std::string_view text,
                                                           std::string_view what) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("{} takes KEY=VALUE, not '{}'", what, text));
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string Cell(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return "-";
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "-";
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    return s.empty() ? "-" : s;
  }
  return DumpJson(*it);
}

std::vector<std::string> WorkspaceHeader() {
  return {"NAME", "ID", "STATE", "SIZE", "IMAGE", "AGE"};
}

std::vector<std::string> WorkspaceRow(const nlohmann::json& ws,
                                      std::chrono::system_clock::time_point now) {
  std::string created = ws.is_object() ? ws.value("created_at", "") : "";
  return {Cell(ws, "name"), Cell(ws, "id"),    Cell(ws, "state"),
          Cell(ws, "size"), Cell(ws, "image"), FormatAge(created, now)};
}

std::string FormatWorkspace(const nlohmann::json& ws, std::chrono::system_clock::time_point now) {
  std::vector<std::pair<std::string, std::string>> lines;
  auto add = [&](std::string label, std::string value) {
    lines.emplace_back(std::move(label), std::move(value));
  };
  auto number = [&](std::string_view key) -> std::optional<int64_t> {
    auto it = ws.find(key);
    if (it == ws.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  auto time = [&](std::string_view key) {
    std::string value = Cell(ws, key);
    if (value == "-") return value;
    return fmt::format("{} ({} ago)", value, FormatAge(value, now));
  };
  add("Name", Cell(ws, "name"));
  add("ID", Cell(ws, "id"));
  std::string state = Cell(ws, "state");
  if (ws.contains("error") && ws["error"].is_string()) {
    state += " (" + ws["error"].get<std::string>() + ")";
  }
  add("State", state);
  std::string image = Cell(ws, "image");
  if (Cell(ws, "image_version") != "-") image += " (" + Cell(ws, "image_version") + ")";
  add("Image", image);
  std::string size = Cell(ws, "size");
  auto cpus = number("cpus");
  auto mem = number("memory_mib");
  auto disk = number("disk_gib");
  if (cpus && mem && disk) {
    size += fmt::format(" ({} vCPU, {} MiB memory, {} GiB disk)", *cpus, *mem, *disk);
  }
  add("Size", size);
  std::string idle = "-";
  if (auto t = number("idle_timeout")) {
    idle = fmt::format("{} after {} idle", Cell(ws, "idle_action"), FormatDuration(*t));
  }
  add("Idle", idle);
  auto max_runtime = number("max_runtime");
  add("Max runtime", max_runtime ? FormatDuration(*max_runtime) : "-");
  add("Auto start", Cell(ws, "auto_start"));
  std::string labels;
  if (ws.contains("labels") && ws["labels"].is_object()) {
    for (const auto& [k, v] : ws["labels"].items()) {
      if (!labels.empty()) labels += ", ";
      labels += k + "=" + (v.is_string() ? v.get<std::string>() : DumpJson(v));
    }
  }
  add("Labels", labels.empty() ? "-" : labels);
  add("Created", time("created_at"));
  add("Started", time("started_at"));
  add("Last active", time("last_active_at"));
  if (ws.contains("awake") && ws["awake"].is_object()) {
    const auto& awake = ws["awake"];
    std::string reasons;
    if (awake.contains("reasons") && awake["reasons"].is_array()) {
      for (const auto& r : awake["reasons"]) {
        if (!reasons.empty()) reasons += ", ";
        reasons += r.is_string() ? r.get<std::string>() : DumpJson(r);
      }
    }
    add("Awake because", reasons.empty() ? "nothing (the idle timer runs)" : reasons);
    std::string idle_at = Cell(awake, "idle_at");
    if (idle_at != "-") add("Idle at", idle_at);
  }
  size_t width = 0;
  for (const auto& [label, value] : lines) width = std::max(width, label.size());
  std::string out;
  for (const auto& [label, value] : lines) {
    out += fmt::format("{:<{}}  {}\n", label + ":", width + 1, value);
  }
  return out;
}

}  // namespace berth::cli
