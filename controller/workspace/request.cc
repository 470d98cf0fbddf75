#include "controller/workspace/request.h"

#include <set>

#include <fmt/format.h>

#include "common/protocol/exec.h"
#include "controller/workspace/image_store.h"

namespace berth::workspace {
namespace {

using nlohmann::json;

Error Invalid(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

Result<int64_t> Integer(const json& body, const char* key, int64_t min, int64_t max) {
  const auto& v = body.at(key);
  if (!v.is_number_integer()) return Fail(Invalid(fmt::format("'{}' must be an integer", key)));
  auto n = v.get<int64_t>();
  if (n < min || n > max) {
    return Fail(Invalid(fmt::format("'{}' must be between {} and {}", key, min, max)));
  }
  return n;
}

Result<IdleAction> ParseIdleAction(const json& v) {
  if (v == "stop") return IdleAction::kStop;
  if (v == "hibernate") return IdleAction::kHibernate;
  return Fail(Invalid("'idle_action' must be \"stop\" or \"hibernate\""));
}

Status ValidateStringMap(const json& v, const char* key, size_t max_entries) {
  if (!v.is_object()) return Fail(Invalid(fmt::format("'{}' must be an object of strings", key)));
  if (v.size() > max_entries) {
    return Fail(Invalid(fmt::format("'{}' has more than {} entries", key, max_entries)));
  }
  for (const auto& [k, val] : v.items()) {
    if (!val.is_string()) return Fail(Invalid(fmt::format("'{}.{}' must be a string", key, k)));
    if (k.empty() || k.size() > kMaxLabelBytes || val.get_ref<const std::string&>().size() > 4096) {
      return Fail(Invalid(fmt::format("'{}' has an empty or oversized entry", key)));
    }
  }
  return {};
}

Status ValidateEnv(const json& env) {
  if (auto s = ValidateStringMap(env, "env", kMaxEnvEntries); !s) return s;
  for (const auto& [k, v] : env.items()) {
    bool ok = !k.empty() && !(k[0] >= '0' && k[0] <= '9');
    for (char c : k) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ok) return Fail(Invalid(fmt::format("'{}' is not a valid environment variable name", k)));
  }
  if (protocol::EnvHeaderValue(env).size() > kMaxEnvBytes) {
    return Fail(Invalid(fmt::format("'env' is larger than {} bytes as JSON", kMaxEnvBytes)));
  }
  return {};
}

Status ValidateLabels(const json& labels) {
  if (auto s = ValidateStringMap(labels, "labels", kMaxLabels); !s) return s;
  for (const auto& [k, v] : labels.items()) {
    if (v.get_ref<const std::string&>().size() > kMaxLabelBytes) {
      return Fail(Invalid(fmt::format("label '{}' is longer than {} bytes", k, kMaxLabelBytes)));
    }
  }
  return {};
}

}  // namespace

std::string_view IdleActionName(IdleAction action) {
  return action == IdleAction::kHibernate ? "hibernate" : "stop";
}

Status ValidateScreen(std::string_view screen) {
  auto bad = [&] {
    return Fail(Invalid(fmt::format("'screen' must be WIDTHxHEIGHT, the width 640-3840 and a multiple of 8, the "
                                    "height 480-2160 (e.g. \"1920x1080\"), not '{}'",
                                    screen.substr(0, 32))));
  };
  size_t x = screen.find('x');
  if (x == std::string_view::npos) return bad();
  auto number = [](std::string_view s) -> int {
    if (s.empty() || s.size() > 4 || s.front() == '0') return -1;
    int n = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return -1;
      n = n * 10 + (c - '0');
    }
    return n;
  };
  int w = number(screen.substr(0, x));
  int h = number(screen.substr(x + 1));
  if (w < 640 || w > 3840 || w % 8 != 0 || h < 480 || h > 2160) return bad();
  return {};
}

Result<std::optional<CheckpointPolicy>> ParseCheckpointPolicy(const json& value) {
  if (value.is_null()) return std::optional<CheckpointPolicy>();
  if (!value.is_object()) return Fail(Invalid("'checkpoints' must be {\"every\": seconds, \"keep\": N} or null"));
  for (const auto& [k, v] : value.items()) {
    if (k != "every" && k != "keep") return Fail(Invalid(fmt::format("unknown field 'checkpoints.{}'", k)));
  }
  CheckpointPolicy p;
  if (!value.contains("every")) return Fail(Invalid("'checkpoints.every' is required (seconds)"));
  auto every = Integer(value, "every", kMinCheckpointEvery, kMaxDuration);
  if (!every) return Fail(Invalid("'checkpoints." + every.error().message.substr(1)));
  p.every_s = *every;
  if (value.contains("keep")) {
    auto keep = Integer(value, "keep", 1, kMaxCheckpointKeep);
    if (!keep) return Fail(Invalid("'checkpoints." + keep.error().message.substr(1)));
    p.keep = static_cast<int>(*keep);
  }
  return std::optional<CheckpointPolicy>(p);
}

Result<CreateRequest> ParseCreateRequest(const json& body) {
  if (!body.is_object()) return Fail(Invalid("the body must be a JSON object"));
  static const std::set<std::string, std::less<>> kKnown = {
      "name", "image", "size", "cpus", "memory_mib", "disk_gib", "idle_timeout", "idle_action",
      "max_runtime", "auto_start", "env", "labels", "network", "screen", "checkpoints"};
  for (const auto& [k, v] : body.items()) {
    if (!kKnown.contains(k)) return Fail(Invalid(fmt::format("unknown field '{}'", k)));
  }
  CreateRequest r;
  if (!body.contains("name") || !body["name"].is_string()) {
    return Fail(Invalid("'name' is required (a string)"));
  }
  r.name = body["name"].get<std::string>();
  if (auto s = ValidateWorkspaceName(r.name); !s) return Fail(s.error());
  if (body.contains("image")) {
    if (!body["image"].is_string()) return Fail(Invalid("'image' must be a string"));
    r.image = body["image"].get<std::string>();
    if (auto s = ValidateImageName(r.image); !s) return Fail(s.error());
  }
  bool custom = body.contains("cpus") || body.contains("memory_mib");
  if (body.contains("size") && !body["size"].is_null()) {
    if (custom) return Fail(Invalid("give either 'size' or 'cpus'/'memory_mib', not both"));
    if (!body["size"].is_string()) return Fail(Invalid("'size' must be a string"));
    auto size = SizeByName(body["size"].get<std::string>());
    if (!size) return Fail(Invalid("'size' must be small, medium or large"));
    r.size = std::string(size->name);
    r.vcpus = size->vcpus;
    r.memory_mib = size->memory_mib;
  } else if (custom) {
    r.size = std::nullopt;
    if (body.contains("cpus")) {
      auto n = Integer(body, "cpus", 1, kMaxCpus);
      if (!n) return Fail(n.error());
      r.vcpus = static_cast<int>(*n);
    }
    if (body.contains("memory_mib")) {
      auto n = Integer(body, "memory_mib", kMinMemoryMib, kMaxMemoryMib);
      if (!n) return Fail(n.error());
      r.memory_mib = static_cast<int>(*n);
    }
  }
  if (body.contains("disk_gib")) {
    auto n = Integer(body, "disk_gib", 1, kMaxDiskGib);
    if (!n) return Fail(n.error());
    r.disk_gib = static_cast<int>(*n);
  }
  if (body.contains("idle_timeout")) {
    auto n = Integer(body, "idle_timeout", kMinIdleTimeout, kMaxDuration);
    if (!n) return Fail(n.error());
    r.idle_timeout_s = *n;
  }
  if (body.contains("idle_action")) {
    auto a = ParseIdleAction(body["idle_action"]);
    if (!a) return Fail(a.error());
    r.idle_action = *a;
  }
  if (body.contains("max_runtime") && !body["max_runtime"].is_null()) {
    auto n = Integer(body, "max_runtime", 60, kMaxDuration);
    if (!n) return Fail(n.error());
    r.max_runtime_s = *n;
  }
  if (body.contains("checkpoints")) {
    auto policy = ParseCheckpointPolicy(body["checkpoints"]);
    if (!policy) return Fail(policy.error());
    r.checkpoints = *policy;
  }
  if (body.contains("screen")) {
    if (!body["screen"].is_string()) return Fail(Invalid("'screen' must be a string such as \"1920x1080\""));
    r.screen = body["screen"].get<std::string>();
    if (auto s = ValidateScreen(r.screen); !s) return Fail(s.error());
  }
  if (body.contains("auto_start")) {
    if (!body["auto_start"].is_boolean()) return Fail(Invalid("'auto_start' must be true or false"));
    r.auto_start = body["auto_start"].get<bool>();
  }
  if (body.contains("env")) {
    if (auto s = ValidateEnv(body["env"]); !s) return Fail(s.error());
    r.env = body["env"];
  }
  if (body.contains("labels")) {
    if (auto s = ValidateLabels(body["labels"]); !s) return Fail(s.error());
    r.labels = body["labels"];
  }
  if (body.contains("network")) {
    auto policy = network::ParsePolicy(body["network"]);
    if (!policy) return Fail(policy.error());
    r.network = std::move(*policy);
  }
  return r;
}

bool IsForkRequest(const json& body) {
  return body.is_object() && (body.contains("from") || body.contains("template"));
}

namespace {

// The fields both fork bodies share: name (required), labels, count (`count_allowed`).
Status ParseForkFields(const json& body, ForkRequest& r, bool count_allowed) {
  if (!body.contains("name") || !body["name"].is_string()) return Fail(Invalid("'name' is required (a string)"));
  r.name = body["name"].get<std::string>();
  if (body.contains("labels")) {
    if (auto s = ValidateLabels(body["labels"]); !s) return Fail(s.error());
    r.labels = body["labels"];
  }
  if (count_allowed && body.contains("count")) {
    auto n = Integer(body, "count", 1, kMaxForksAtOnce);
    if (!n) return Fail(n.error());
    r.count = static_cast<int>(*n);
  }
  // Each fork's name, "-<count>" included, must be a workspace name.
  std::string longest = r.count == 1 ? r.name : fmt::format("{}-{}", r.name, r.count);
  if (auto s = ValidateWorkspaceName(r.name); !s) return Fail(s.error());
  if (auto s = ValidateWorkspaceName(longest); !s) return Fail(s.error());
  return {};
}

}  // namespace

Result<ForkRequest> ParseForkRequest(const json& body) {
  if (!body.is_object()) return Fail(Invalid("the body must be a JSON object"));
  const char* with = body.contains("template") ? "template" : "from";
  for (const auto& [k, v] : body.items()) {
    if (k == with || k == "name" || k == "labels") continue;
    return Fail(Invalid(fmt::format("'{}' cannot be given with '{}': a fork has its source's image, size, settings "
                                    "and network policy (only 'name' and 'labels' are its own)",
                                    k, with)));
  }
  if (body.contains("template")) {
    ForkRequest r;
    if (!body["template"].is_string()) return Fail(Invalid("'template' must be a template's name"));
    r.template_name = body["template"].get<std::string>();
    if (auto s = ValidateName(r.template_name); !s) return Fail(s.error());
    if (auto s = ParseForkFields(body, r, false); !s) return Fail(s.error());
    return r;
  }
  const json& from = body["from"];
  if (!from.is_object() || !from.contains("workspace") || !from["workspace"].is_string()) {
    return Fail(Invalid("'from' must be {\"workspace\": ID or name, \"checkpoint\"?: ID or name}"));
  }
  for (const auto& [k, v] : from.items()) {
    if (k != "workspace" && k != "checkpoint") return Fail(Invalid(fmt::format("unknown field 'from.{}'", k)));
  }
  ForkRequest r;
  r.source = from["workspace"].get<std::string>();
  if (r.source.empty() || r.source.size() > 128) return Fail(Invalid("'from.workspace' must be 1 to 128 characters"));
  if (from.contains("checkpoint") && !from["checkpoint"].is_null()) {
    if (!from["checkpoint"].is_string()) return Fail(Invalid("'from.checkpoint' must be a string"));
    r.checkpoint = from["checkpoint"].get<std::string>();
    if (r.checkpoint->empty() || r.checkpoint->size() > 128) {
      return Fail(Invalid("'from.checkpoint' must be 1 to 128 characters"));
    }
  }
  if (auto s = ParseForkFields(body, r, false); !s) return Fail(s.error());
  return r;
}

Result<ForkRequest> ParseForkCheckpointRequest(const json& body, std::string source, std::string checkpoint) {
  if (!body.is_object()) return Fail(Invalid("the body must be a JSON object"));
  for (const auto& [k, v] : body.items()) {
    if (k != "name" && k != "count" && k != "labels") return Fail(Invalid(fmt::format("unknown field '{}'", k)));
  }
  ForkRequest r;
  r.source = std::move(source);
  r.checkpoint = std::move(checkpoint);
  if (auto s = ParseForkFields(body, r, true); !s) return Fail(s.error());
  return r;
}

json TemplateBuild::ToJson() const {
  json j{{"script", script}, {"image", image}, {"size", size}, {"timeout_s", timeout_s}};
  if (!start.empty()) j["start"] = start;
  if (!ready.empty()) j["ready"] = ready;
  return j;
}

namespace {

Result<TemplateRequest> ParseTemplateBuild(const json& body) {
  TemplateRequest r;
  TemplateBuild b;
  r.name = body["name"].get<std::string>();
  if (r.name.size() + kTemplateBuilderPrefix.size() > kMaxWorkspaceName) {
    return Fail(Invalid(fmt::format("a template built from a script has a name of at most {} characters (its "
                                    "workspace is called \"{}<name>\")",
                                    kMaxWorkspaceName - kTemplateBuilderPrefix.size(), kTemplateBuilderPrefix)));
  }
  auto text = [&body](const char* key, size_t max, std::string& out) -> Status {
    if (!body.contains(key) || body[key].is_null()) return {};
    if (!body[key].is_string()) return Fail(Invalid(fmt::format("'{}' must be a string", key)));
    out = body[key].get<std::string>();
    if (out.size() > max || out.find('\0') != std::string::npos) {
      return Fail(Invalid(fmt::format("'{}' must be at most {} bytes, without NUL", key, max)));
    }
    return {};
  };
  if (auto s = text("script", kMaxTemplateScript, b.script); !s) return Fail(s.error());
  if (b.script.empty()) return Fail(Invalid("'script' must not be empty"));
  if (auto s = text("start", 4096, b.start); !s) return Fail(s.error());
  if (auto s = text("ready", 4096, b.ready); !s) return Fail(s.error());
  if (auto s = text("image", 128, b.image); !s) return Fail(s.error());
  if (auto s = ValidateImageName(b.image); !s) return Fail(s.error());
  if (auto s = text("size", 16, b.size); !s) return Fail(s.error());
  if (!SizeByName(b.size)) return Fail(Invalid("'size' must be small, medium or large"));
  if (body.contains("timeout_s")) {
    auto n = Integer(body, "timeout_s", 10, kMaxTemplateBuild);
    if (!n) return Fail(n.error());
    b.timeout_s = *n;
  }
  r.build = std::move(b);
  return r;
}

}  // namespace

Result<TemplateRequest> ParseTemplateRequest(const json& body) {
  if (!body.is_object()) return Fail(Invalid("the body must be a JSON object"));
  const bool scripted = body.contains("script");
  for (const auto& [k, v] : body.items()) {
    bool known = k == "name" || (scripted ? (k == "script" || k == "start" || k == "ready" || k == "image" ||
                                             k == "size" || k == "timeout_s")
                                          : k == "from");
    if (!known) {
      return Fail(Invalid(k == "from" ? std::string("give either 'from' or 'script', not both")
                                      : fmt::format("unknown field '{}'", k)));
    }
  }
  if (!body.contains("name") || !body["name"].is_string()) return Fail(Invalid("'name' is required (a string)"));
  if (auto s = ValidateName(body["name"].get<std::string>()); !s) return Fail(s.error());
  if (scripted) return ParseTemplateBuild(body);
  TemplateRequest r;
  if (!body.contains("name") || !body["name"].is_string()) return Fail(Invalid("'name' is required (a string)"));
  r.name = body["name"].get<std::string>();
  if (auto s = ValidateName(r.name); !s) return Fail(s.error());
  const json* from = body.contains("from") ? &body["from"] : nullptr;
  if (from == nullptr || !from->is_object() || !from->contains("workspace") || !(*from)["workspace"].is_string()) {
    return Fail(Invalid("'from' must be {\"workspace\": ID or name, \"checkpoint\"?: ID or name}, or give 'script' "
                        "to build the template"));
  }
  for (const auto& [k, v] : from->items()) {
    if (k != "workspace" && k != "checkpoint") return Fail(Invalid(fmt::format("unknown field 'from.{}'", k)));
  }
  r.workspace = (*from)["workspace"].get<std::string>();
  if (r.workspace.empty() || r.workspace.size() > 128) return Fail(Invalid("'from.workspace' must be 1 to 128 characters"));
  if (from->contains("checkpoint") && !(*from)["checkpoint"].is_null()) {
    if (!(*from)["checkpoint"].is_string()) return Fail(Invalid("'from.checkpoint' must be a string"));
    r.checkpoint = (*from)["checkpoint"].get<std::string>();
    if (r.checkpoint->empty() || r.checkpoint->size() > 128) {
      return Fail(Invalid("'from.checkpoint' must be 1 to 128 characters"));
    }
  }
  return r;
}

bool SizeChanged(const Workspace& before, const Workspace& after) {
  return before.vcpus != after.vcpus || before.memory_mib != after.memory_mib ||
         before.disk_gib != after.disk_gib;
}

Status ApplyPatch(const json& body, Workspace& ws) {
  if (!body.is_object() || body.empty()) {
    return Fail(Invalid("the body must be a JSON object with the fields to change"));
  }
  Workspace out = ws;
  if (body.contains("size") && (body.contains("cpus") || body.contains("memory_mib"))) {
    return Fail(Invalid("give either 'size' or 'cpus'/'memory_mib', not both"));
  }
  for (const auto& [k, v] : body.items()) {
    if (k == "size") {
      if (!v.is_string()) return Fail(Invalid("'size' must be a string"));
      auto size = SizeByName(v.get<std::string>());
      if (!size) return Fail(Invalid("'size' must be small, medium or large"));
      out.size = std::string(size->name);
      out.vcpus = size->vcpus;
      out.memory_mib = size->memory_mib;
    } else if (k == "cpus") {
      auto n = Integer(body, "cpus", 1, kMaxCpus);
      if (!n) return Fail(n.error());
      out.size = std::nullopt;
      out.vcpus = static_cast<int>(*n);
    } else if (k == "memory_mib") {
      auto n = Integer(body, "memory_mib", kMinMemoryMib, kMaxMemoryMib);
      if (!n) return Fail(n.error());
      out.size = std::nullopt;
      out.memory_mib = static_cast<int>(*n);
    } else if (k == "disk_gib") {
      auto n = Integer(body, "disk_gib", 1, kMaxDiskGib);
      if (!n) return Fail(n.error());
      // Growing is qemu-img resize and resize2fs in the guest; shrinking would cut the file
      // system under the guest's data.
      if (*n < ws.disk_gib) {
        return Fail(Invalid(fmt::format("'disk_gib' can only grow (it is {} GiB)", ws.disk_gib)));
      }
      out.disk_gib = static_cast<int>(*n);
    } else if (k == "name") {
      if (!v.is_string()) return Fail(Invalid("'name' must be a string"));
      out.name = v.get<std::string>();
      if (auto s = ValidateWorkspaceName(out.name); !s) return s;
    } else if (k == "labels") {
      if (auto s = ValidateLabels(v); !s) return s;
      out.labels = v;
    } else if (k == "idle_timeout") {
      auto n = Integer(body, "idle_timeout", kMinIdleTimeout, kMaxDuration);
      if (!n) return Fail(n.error());
      out.idle_timeout_s = *n;
    } else if (k == "idle_action") {
      auto a = ParseIdleAction(v);
      if (!a) return Fail(a.error());
      out.idle_action = *a;
    } else if (k == "max_runtime") {
      if (v.is_null()) {
        out.max_runtime_s = std::nullopt;
      } else {
        auto n = Integer(body, "max_runtime", 60, kMaxDuration);
        if (!n) return Fail(n.error());
        out.max_runtime_s = *n;
      }
    } else if (k == "checkpoints") {
      auto policy = ParseCheckpointPolicy(v);
      if (!policy) return Fail(policy.error());
      out.checkpoints = *policy;
    } else if (k == "auto_start") {
      if (!v.is_boolean()) return Fail(Invalid("'auto_start' must be true or false"));
      out.auto_start = v.get<bool>();
    } else if (k == "env") {
      // Replaces the whole env; it applies to the next exec or session.
      if (auto s = ValidateEnv(v); !s) return s;
      out.env = v;
    } else {
      return Fail(Invalid(fmt::format("'{}' cannot be changed (name, labels, env, idle_timeout, "
                                      "idle_action, max_runtime, checkpoints, auto_start, size, "
                                      "cpus, memory_mib, disk_gib can)", k)));
    }
  }
  ws = std::move(out);
  return {};
}

}  // namespace berth::workspace
