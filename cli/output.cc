#include "cli/output.h"

#include <fmt/format.h>

#include "common/v1/time.h"
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
  auto t = v1::ParseTime(text);
  if (!t) return std::nullopt;
  return std::chrono::system_clock::time_point(std::chrono::seconds(*t));
}

std::string FormatAge(std::string_view iso_time, std::chrono::system_clock::time_point now) {
  auto t = ParseIsoTime(iso_time);
  if (!t) return "-";
  return FormatAge(std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count(),
                   now);
}

std::string FormatAge(int64_t unix_seconds, std::chrono::system_clock::time_point now) {
  auto t = std::chrono::system_clock::time_point(std::chrono::seconds(unix_seconds));
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - t).count();
  if (secs < -60) return "-";
  if (secs < 0) secs = 0;
  if (secs < 60) return fmt::format("{}s", secs);
  if (secs < 3600) return fmt::format("{}m", secs / 60);
  if (secs < 86400) return fmt::format("{}h", secs / 3600);
  if (secs < 14 * 86400) return fmt::format("{}d", secs / 86400);
  return fmt::format("{}w", secs / (7 * 86400));
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

std::vector<std::string> WorkspaceRow(const v1::Workspace& ws,
                                      std::chrono::system_clock::time_point now) {
  auto or_dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  return {or_dash(ws.name),          or_dash(ws.id),    std::string(v1::StateName(ws.state)),
          ws.size.value_or("-"),     or_dash(ws.image), FormatAge(ws.created_at, now)};
}

std::string StateLine(const v1::Workspace& ws) {
  return fmt::format("{} ({}): {}", ws.name, ws.id, v1::StateName(ws.state));
}

std::string CheckpointContents(const v1::Checkpoint& c) {
  if (!c.memory) return "disks";
  if (!c.pause_ms) return "memory";
  return fmt::format("memory (paused {} ms)", *c.pause_ms);
}

std::string FormatWorkspace(const v1::Workspace& ws, std::chrono::system_clock::time_point now) {
  using std::chrono::seconds;
  std::vector<std::pair<std::string, std::string>> lines;
  auto add = [&](std::string label, std::string value) {
    lines.emplace_back(std::move(label), std::move(value));
  };
  auto time = [&](const std::optional<int64_t>& t) -> std::string {
    if (!t) return "-";
    return fmt::format("{} ({} ago)", v1::FormatTime(*t), FormatAge(*t, now));
  };
  add("Name", ws.name);
  add("ID", ws.id);
  std::string state(v1::StateName(ws.state));
  if (ws.error) state += " (" + *ws.error + ")";
  add("State", state);
  std::string image = ws.image.empty() ? "-" : ws.image;
  if (!ws.image_version.empty()) image += " (" + ws.image_version + ")";
  add("Image", image);
  add("Size", fmt::format("{} ({} vCPU, {} MiB memory, {} GiB disk)", ws.size.value_or("-"),
                          ws.cpus, ws.memory_mib, ws.disk_gib));
  add("Idle", fmt::format("{} after {} idle", v1::IdleActionName(ws.idle_action),
                          FormatDuration(seconds(ws.idle_timeout))));
  add("Max runtime", ws.max_runtime ? FormatDuration(seconds(*ws.max_runtime)) : "-");
  add("Checkpoints", ws.checkpoints ? fmt::format("every {}, keep {}", FormatDuration(seconds(ws.checkpoints->every)),
                                                  ws.checkpoints->keep)
                                    : "-");
  add("Auto start", ws.auto_start ? "true" : "false");
  std::string labels;
  for (const auto& [k, v] : ws.labels) {
    if (!labels.empty()) labels += ", ";
    labels += k + "=" + v;
  }
  add("Labels", labels.empty() ? "-" : labels);
  add("Created", time(ws.created_at));
  add("Started", time(ws.started_at));
  add("Last active", time(ws.last_active_at));
  if (ws.awake) {
    std::string reasons = fmt::format("{}", fmt::join(ws.awake->reasons, ", "));
    add("Awake because", reasons.empty() ? "nothing (the idle timer runs)" : reasons);
    if (ws.awake->idle_at) add("Idle at", v1::FormatTime(*ws.awake->idle_at));
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
