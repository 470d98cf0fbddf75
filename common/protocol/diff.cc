#include "common/protocol/diff.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/json.h"

namespace berth::protocol {
namespace {

using nlohmann::json;

constexpr size_t kMaxPath = 4096;
constexpr size_t kMaxName = 256;

Error Invalid(std::string_view field, std::string_view why) {
  return Error(ErrorCode::kInvalidArgument, fmt::format("'{}' {}", field, why));
}

Status CheckSerial(std::string_view field, const std::string& serial) {
  auto ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
  if (serial.empty() || serial.size() > 20 || !std::all_of(serial.begin(), serial.end(), ok)) {
    return Fail(Invalid(field, "must be a disk serial: 1 to 20 of a-z, 0-9 and '-'"));
  }
  return {};
}

json DisksJson(const DiffDisks& d) { return {{"root", d.root}, {"data", d.data}}; }

Result<DiffDisks> DisksFromJson(const json& j, std::string_view field) {
  if (!j.is_object()) return Fail(Invalid(field, "must be an object {root, data}"));
  DiffDisks out;
  for (auto [key, into] : {std::pair{"root", &out.root}, std::pair{"data", &out.data}}) {
    auto value = OptionalString(j, key);
    if (!value) return Fail(value.error());
    std::string name = fmt::format("{}.{}", field, key);
    if (!value->has_value()) return Fail(Invalid(name, "is required"));
    *into = **value;
    if (auto s = CheckSerial(name, *into); !s) return Fail(s.error());
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "root" && key != "data") return Fail(Invalid(fmt::format("{}.{}", field, key), "is not a known field"));
  }
  return out;
}

// Reads `j[key]`, an array of at most kMaxDiffEntries objects, through `one`.
template <typename T, typename F>
Status ReadList(const json& j, std::string_view key, std::string_view field, std::vector<T>& out, F one) {
  if (!j.contains(key)) return {};
  const json& list = j[std::string(key)];
  if (!list.is_array()) return Fail(Invalid(field, "must be an array"));
  if (list.size() > static_cast<size_t>(kMaxDiffEntries)) {
    return Fail(Invalid(field, fmt::format("has more than {} entries", kMaxDiffEntries)));
  }
  for (const auto& item : list) {
    if (!item.is_object()) return Fail(Invalid(field, "holds a non-object"));
    auto parsed = one(item);
    if (!parsed) return Fail(parsed.error());
    out.push_back(std::move(*parsed));
  }
  return {};
}

Result<std::string> BoundedString(const json& j, std::string_view key, std::string_view field, size_t max,
                                  bool required) {
  auto value = OptionalString(j, key);
  if (!value) return Fail(value.error());
  if (!value->has_value()) {
    if (required) return Fail(Invalid(field, "is required"));
    return std::string();
  }
  if ((*value)->size() > max) return Fail(Invalid(field, fmt::format("is longer than {} bytes", max)));
  return **value;
}

Result<int64_t> Count(const json& j, std::string_view key, std::string_view field) {
  auto value = OptionalInt(j, key);
  if (!value) return Fail(value.error());
  int64_t n = value->value_or(0);
  if (n < 0) return Fail(Invalid(field, "must not be negative"));
  return n;
}

Result<FileChange> FileChangeFromJson(const json& j, std::string_view list) {
  FileChange out;
  std::string field = fmt::format("files.{}", list);
  auto path = BoundedString(j, "path", field + "[].path", kMaxPath, true);
  if (!path) return Fail(path.error());
  if (!path->starts_with('/')) return Fail(Invalid(field + "[].path", "must be absolute"));
  out.path = std::move(*path);
  auto type = BoundedString(j, "type", field + "[].type", 16, true);
  if (!type) return Fail(type.error());
  if (*type != "file" && *type != "dir" && *type != "symlink" && *type != "other") {
    return Fail(Invalid(field + "[].type", "must be file, dir, symlink or other"));
  }
  out.type = std::move(*type);
  auto size = Count(j, "size", field + "[].size");
  auto entries = Count(j, "entries", field + "[].entries");
  if (!size) return Fail(size.error());
  if (!entries) return Fail(entries.error());
  out.size = *size;
  out.entries = *entries;
  return out;
}

// {name, version} for an installed or removed package, {name, from, to} for a changed one.
Result<PackageChange> PackageFromJson(const json& j, std::string_view list) {
  PackageChange out;
  std::string field = fmt::format("packages.{}", list);
  auto name = BoundedString(j, "name", field + "[].name", kMaxName, true);
  if (!name) return Fail(name.error());
  out.name = std::move(*name);
  if (list == "changed") {
    auto from = BoundedString(j, "from", field + "[].from", kMaxName, true);
    auto to = BoundedString(j, "to", field + "[].to", kMaxName, true);
    if (!from) return Fail(from.error());
    if (!to) return Fail(to.error());
    out.from = std::move(*from);
    out.to = std::move(*to);
    return out;
  }
  auto version = BoundedString(j, "version", field + "[].version", kMaxName, true);
  if (!version) return Fail(version.error());
  (list == "installed" ? out.to : out.from) = std::move(*version);
  return out;
}

}  // namespace

json ToJson(const DiffRequest& r) {
  json out = {{"from", DisksJson(r.from)}, {"max_entries", r.max_entries}, {"budget_ms", r.budget_ms}};
  if (r.to) out["to"] = DisksJson(*r.to);
  return out;
}

Result<DiffRequest> DiffRequestFromJson(const json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "body must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key != "from" && key != "to" && key != "max_entries" && key != "budget_ms") {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("unknown field '{}'", key));
    }
  }
  DiffRequest out;
  if (!j.contains("from")) return Fail(Invalid("from", "is required"));
  auto from = DisksFromJson(j["from"], "from");
  if (!from) return Fail(from.error());
  out.from = std::move(*from);
  if (j.contains("to") && !j["to"].is_null()) {
    auto to = DisksFromJson(j["to"], "to");
    if (!to) return Fail(to.error());
    out.to = std::move(*to);
  }
  auto max = OptionalInt(j, "max_entries");
  auto budget = OptionalInt(j, "budget_ms");
  if (!max) return Fail(max.error());
  if (!budget) return Fail(budget.error());
  int64_t entries = max->value_or(kDefaultDiffEntries);
  if (entries < 1 || entries > kMaxDiffEntries) {
    return Fail(Invalid("max_entries", fmt::format("must be 1 to {}", kMaxDiffEntries)));
  }
  out.max_entries = static_cast<int>(entries);
  out.budget_ms = budget->value_or(out.budget_ms);
  if (out.budget_ms < 1000 || out.budget_ms > 600000) return Fail(Invalid("budget_ms", "must be 1000 to 600000"));
  return out;
}

json ToJson(const DiffResult& r) {
  auto files = [](const std::vector<FileChange>& list) {
    json out = json::array();
    for (const auto& f : list) {
      json one = {{"path", f.path}, {"type", f.type}, {"size", f.size}};
      if (f.entries > 0) one["entries"] = f.entries;
      out.push_back(std::move(one));
    }
    return out;
  };
  auto packages = [](const std::vector<PackageChange>& list, std::string_view kind) {
    json out = json::array();
    for (const auto& p : list) {
      if (kind == "changed") {
        out.push_back({{"name", p.name}, {"from", p.from}, {"to", p.to}});
      } else {
        out.push_back({{"name", p.name}, {"version", kind == "installed" ? p.to : p.from}});
      }
    }
    return out;
  };
  const auto& c = r.files.counts;
  return {
      {"paths", r.paths},
      {"files",
       {{"added", files(r.files.added)},
        {"changed", files(r.files.changed)},
        {"removed", files(r.files.removed)},
        {"counts", {{"added", c.added}, {"changed", c.changed}, {"removed", c.removed}}},
        {"truncated", r.files.truncated}}},
      {"packages",
       {{"installed", packages(r.packages.installed, "installed")},
        {"changed", packages(r.packages.changed, "changed")},
        {"removed", packages(r.packages.removed, "removed")}}},
      {"took_ms", r.took_ms},
  };
}

Result<DiffResult> DiffResultFromJson(const json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "diff answer: not a JSON object");
  DiffResult out;
  if (j.contains("paths")) {
    const json& paths = j["paths"];
    if (!paths.is_array() || paths.size() > 16) return Fail(Invalid("paths", "must be an array of at most 16"));
    for (const auto& p : paths) {
      if (!p.is_string() || p.get<std::string>().size() > kMaxPath || !p.get<std::string>().starts_with('/')) {
        return Fail(Invalid("paths", "must hold absolute paths"));
      }
      out.paths.push_back(p.get<std::string>());
    }
  }
  if (j.contains("files")) {
    const json& files = j["files"];
    if (!files.is_object()) return Fail(Invalid("files", "must be an object"));
    for (auto [key, list] : {std::pair{"added", &out.files.added}, std::pair{"changed", &out.files.changed},
                             std::pair{"removed", &out.files.removed}}) {
      auto one = [key](const json& item) { return FileChangeFromJson(item, key); };
      if (auto s = ReadList(files, key, fmt::format("files.{}", key), *list, one); !s) return Fail(s.error());
    }
    if (files.contains("counts")) {
      const json& counts = files["counts"];
      if (!counts.is_object()) return Fail(Invalid("files.counts", "must be an object"));
      auto& c = out.files.counts;
      for (auto [key, into] : {std::pair{"added", &c.added}, std::pair{"changed", &c.changed},
                               std::pair{"removed", &c.removed}}) {
        auto n = Count(counts, key, fmt::format("files.counts.{}", key));
        if (!n) return Fail(n.error());
        *into = *n;
      }
    }
    auto truncated = OptionalBool(files, "truncated");
    if (!truncated) return Fail(truncated.error());
    out.files.truncated = truncated->value_or(false);
  }
  if (j.contains("packages")) {
    const json& packages = j["packages"];
    if (!packages.is_object()) return Fail(Invalid("packages", "must be an object"));
    for (auto [key, list] : {std::pair{"installed", &out.packages.installed},
                             std::pair{"changed", &out.packages.changed},
                             std::pair{"removed", &out.packages.removed}}) {
      auto one = [key](const json& item) { return PackageFromJson(item, key); };
      if (auto s = ReadList(packages, key, fmt::format("packages.{}", key), *list, one); !s) return Fail(s.error());
    }
  }
  auto took = Count(j, "took_ms", "took_ms");
  if (!took) return Fail(took.error());
  out.took_ms = *took;
  return out;
}

}  // namespace berth::protocol
