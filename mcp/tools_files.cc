// File tools: read (bounded, ranged, binary detected), write, edit (replace a unique string),
// list, delete. Paths are guest paths: absolute, or relative to /workspace.
#include <limits>

#include <fmt/format.h>

#include "common/protocol/exec.h"
#include "mcp/file_edit.h"
#include "mcp/text_limits.h"
#include "mcp/tool.h"

namespace berth::mcp {
namespace {

using nlohmann::json;

// file_read shows this much by default, and at most this much per call.
constexpr uint64_t kDefaultReadBytes = 64 * 1024;
constexpr uint64_t kMaxReadBytes = 1024 * 1024;
// file_write's content and file_edit's file: what a JSON-RPC message can reasonably carry.
constexpr size_t kMaxWriteBytes = 10u << 20;
constexpr uint64_t kMaxEditBytes = 10u << 20;
// file_list shows at most this many entries by default.
constexpr int kDefaultListEntries = 500;

Result<std::string> PathArg(const json& args, const char* key = "path") {
  std::string raw = args.contains(key) ? args[key].get<std::string>() : std::string();
  auto normalized = protocol::NormalizePath(ResolveGuestPath(raw));
  if (!normalized) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("bad path '{}': {}", raw, normalized.error().message));
  }
  return normalized;
}

Result<ToolResult> Read(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto path = PathArg(args);
  if (!path) return Fail(path.error());
  uint64_t offset = args.value("offset", uint64_t{0});
  uint64_t max = args.value("max_bytes", kDefaultReadBytes);
  auto piece = ctx.backend().ReadFile(*ws, *path, offset, max, ToolContext::CallDeadline());
  if (!piece) return Fail(piece.error());
  if (piece->directory) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("{} is a directory: list it with file_list", *path));
  }
  uint64_t total = piece->size.value_or(offset + piece->data.size());
  json structured = json::object();
  structured["path"] = *path;
  structured["size"] = total;
  structured["offset"] = offset;
  if (LooksBinary(piece->data)) {
    structured["binary"] = true;
    return ToolResult::Text(
        fmt::format("{} is a binary file ({} bytes); its contents are not shown. Inspect it "
                    "with exec: file, xxd {} | head, or base64.",
                    *path, total, *path),
        structured);
  }
  // Do not end inside a UTF-8 character: the rest comes with the next offset.
  std::string_view text = piece->data;
  if (offset + text.size() < total) text = text.substr(0, protocol::CompleteUtf8Prefix(text));
  uint64_t end = offset + text.size();
  structured["binary"] = false;
  structured["bytes"] = text.size();
  structured["truncated"] = end < total;
  ToolResult result = ToolResult::Text(std::string(text), structured);
  if (total == 0) {
    result.texts.push_back(fmt::format("({} is empty)", *path));
  } else if (end < total || offset > 0) {
    std::string note = fmt::format("[{}: bytes {}..{} of {} shown", *path, offset, end, total);
    if (end < total) note += fmt::format("; call file_read with offset={} for more", end);
    result.texts.push_back(note + "]");
  }
  return result;
}

Result<ToolResult> Write(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto path = PathArg(args);
  if (!path) return Fail(path.error());
  const std::string& content = args["content"].get_ref<const std::string&>();
  WriteOptions options;
  if (args.contains("mode")) {
    auto mode = protocol::ParseMode(args["mode"].get<std::string>());
    if (!mode) return Fail(mode.error());
    options.mode = *mode;
  }
  options.overwrite = args.value("overwrite", true);
  auto info = ctx.backend().WriteFile(*ws, *path, content, options, ToolContext::CallDeadline());
  if (!info) {
    if (info.error().code == ErrorCode::kAlreadyExists) {
      return Fail(ErrorCode::kAlreadyExists,
                  fmt::format("{} exists and overwrite is false", *path));
    }
    return Fail(info.error());
  }
  return ToolResult::Text(fmt::format("Wrote {} bytes to {} (mode {}).", content.size(), info->path,
                                      protocol::FormatMode(info->mode)),
                          protocol::ToJson(*info));
}

Result<ToolResult> Edit(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto path = PathArg(args);
  if (!path) return Fail(path.error());
  Backend& backend = ctx.backend();
  auto before = backend.StatPath(*ws, *path, ToolContext::CallDeadline());
  if (!before) return Fail(before.error());
  if (before->type == "symlink") {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("{} is a symbolic link to {}: edit the file it points to", *path,
                            before->link_target.value_or("?")));
  }
  if (before->type != "file") {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("{} is a {}, not a file", *path, before->type));
  }
  if (before->size > kMaxEditBytes) {
    return Fail(ErrorCode::kTooLarge,
                fmt::format("{} is {} bytes, over file_edit's limit of {}; edit it with exec "
                            "(sed, patch, python)",
                            *path, before->size, kMaxEditBytes));
  }
  auto piece = backend.ReadFile(*ws, *path, 0, kMaxEditBytes + 1, ToolContext::CallDeadline());
  if (!piece) return Fail(piece.error());
  if (LooksBinary(piece->data)) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("{} is not a text file (binary or not UTF-8)", *path));
  }
  auto edited = ApplyEdit(piece->data, args["old_string"].get_ref<const std::string&>(),
                          args["new_string"].get_ref<const std::string&>(),
                          args.value("replace_all", false));
  if (!edited) {
    return Fail(edited.error().code, fmt::format("{}: {}", *path, edited.error().message));
  }
  // Someone (a build, another agent) may have written the file since it was read: do not undo
  // their change silently.
  auto now = backend.StatPath(*ws, *path, ToolContext::CallDeadline());
  if (!now) return Fail(now.error());
  if (now->mtime_ns != before->mtime_ns || now->size != before->size) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("{} changed while it was being edited; read it again and retry",
                            *path));
  }
  const std::string& content = edited->content;
  WriteOptions options;
  options.mode = before->mode;
  auto info = backend.WriteFile(*ws, *path, content, options, ToolContext::CallDeadline());
  if (!info) return Fail(info.error());
  json structured = json::object();
  structured["path"] = *path;
  structured["replacements"] = edited->replacements;
  structured["lines"] = edited->lines;
  structured["size"] = content.size();
  return ToolResult::Text(
      fmt::format("Replaced {} occurrence{} in {} (line{} {}); it is now {} bytes.",
                  edited->replacements, edited->replacements == 1 ? "" : "s", *path,
                  edited->lines.size() == 1 ? "" : "s", fmt::join(edited->lines, ", "),
                  content.size()),
      structured);
}

std::string ShortTime(int64_t ns) {
  std::string full = protocol::FormatTime(ns);  // 2024-05-01T12:00:00.123456789Z
  return full.size() >= 19 ? full.substr(0, 16).replace(10, 1, " ") : full;
}

Result<ToolResult> List(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto path = PathArg(args);
  if (!path) return Fail(path.error());
  int limit = args.value("limit", kDefaultListEntries);
  auto listing = ctx.backend().ListDirectory(*ws, *path, ToolContext::CallDeadline());
  if (!listing) {
    if (listing.error().code == ErrorCode::kFailedPrecondition) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("{} is not a directory: read it with file_read", *path));
    }
    return Fail(listing.error());
  }
  size_t shown = std::min(listing->entries.size(), static_cast<size_t>(limit));
  std::string text = fmt::format("{}: {} entr{}{}\n", listing->path, listing->entries.size(),
                                 listing->entries.size() == 1 ? "y" : "ies",
                                 listing->truncated ? " (the server's cap; there are more)" : "");
  json entries = json::array();
  for (size_t i = 0; i < shown; ++i) {
    const auto& e = listing->entries[i];
    std::string name = e.name;
    if (e.type == "dir") name += "/";
    if (e.type == "symlink") name += " -> " + e.link_target.value_or("?");
    text += fmt::format("{:<7} {:>10}  {}  {}  {}\n", e.type, e.type == "dir" ? "-" : std::to_string(e.size),
                        protocol::FormatMode(e.mode), ShortTime(e.mtime_ns), name);
    entries.push_back(protocol::ToJson(e));
  }
  if (shown < listing->entries.size()) {
    text += fmt::format("... {} more (raise 'limit', or use exec with find/ls)\n",
                        listing->entries.size() - shown);
  }
  json structured = json::object();
  structured["path"] = listing->path;
  structured["entries"] = std::move(entries);
  structured["truncated"] = shown < listing->entries.size() || listing->truncated;
  return ToolResult::Text(std::move(text), structured);
}

Result<ToolResult> Delete(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto path = PathArg(args);
  if (!path) return Fail(path.error());
  if (*path == "/" || *path == "/workspace") {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("refusing to delete {}; delete what is inside it by name", *path));
  }
  bool recursive = args.value("recursive", false);
  auto removed = ctx.backend().DeletePath(*ws, *path, recursive, ToolContext::CallDeadline());
  if (!removed) {
    const auto& e = removed.error();
    if (!recursive && (e.message.find("not empty") != std::string::npos ||
                       e.message.find("ENOTEMPTY") != std::string::npos)) {
      return Fail(e.code, fmt::format("{} (pass recursive: true to delete a directory with "
                                      "its contents)",
                                      e.message));
    }
    return Fail(e);
  }
  json structured = json::object();
  structured["path"] = *path;
  structured["deleted"] = true;
  return ToolResult::Text(fmt::format("Deleted {}.", *path), structured);
}

json PathSchema(std::string_view what) {
  return schema::String(fmt::format(
      "{}: absolute (/etc/hosts), or relative to /workspace, the workspace's durable disk.",
      what));
}

}  // namespace

std::vector<Tool> FileTools() {
  std::vector<Tool> tools;

  json read = json::object();
  read["path"] = PathSchema("The file");
  read["workspace"] = schema::WorkspaceArg();
  read["offset"] = schema::Integer("Start at this byte (default 0).", 0,
                                   std::numeric_limits<int32_t>::max());
  read["max_bytes"] = schema::Integer(
      fmt::format("Bytes to read at most (default {}).", kDefaultReadBytes), 1, kMaxReadBytes);
  tools.push_back(Tool{
      "file_read", "Read a file",
      fmt::format("Read a text file in a workspace. Shows at most max_bytes (default {} KiB) "
                  "and then says which offset to read on from; binary files are reported, not "
                  "shown.",
                  kDefaultReadBytes / 1024),
      schema::Object(read, {"path"}), ReadOnly(), Read});

  json write = json::object();
  write["path"] = PathSchema("The file to write; missing parent directories are created");
  write["content"] = schema::String("The whole new content of the file (text).");
  write["content"]["maxLength"] = kMaxWriteBytes;
  write["workspace"] = schema::WorkspaceArg();
  write["mode"] = schema::String("Permissions in octal, e.g. \"0755\" for a script (default: "
                                 "the existing file's, else 0644).");
  write["overwrite"] = schema::Boolean("Replace an existing file (default true).");
  tools.push_back(Tool{
      "file_write", "Write a file",
      "Create or replace a file in a workspace with the given text, atomically (readers never "
      "see half a file). For a change inside an existing file prefer file_edit.",
      schema::Object(write, {"path", "content"}), Mutating(true, true), Write});

  json edit = json::object();
  edit["path"] = PathSchema("The file to edit");
  edit["old_string"] = schema::String(
      "The exact text to replace, whitespace and indentation included. It must occur exactly "
      "once unless replace_all is set: include enough surrounding lines to make it unique.");
  edit["old_string"]["minLength"] = 1;
  edit["new_string"] = schema::String("The text to put in its place.");
  edit["replace_all"] = schema::Boolean("Replace every occurrence (default false).");
  edit["workspace"] = schema::WorkspaceArg();
  tools.push_back(Tool{
      "file_edit", "Edit a file",
      "Replace a unique piece of text in a text file of a workspace. Fails, changing nothing, "
      "when old_string is not found or is found more than once (the answer gives the lines). "
      "Read the file first so old_string is exact.",
      schema::Object(edit, {"path", "old_string", "new_string"}), Mutating(true, false), Edit});

  json list = json::object();
  list["path"] = PathSchema("The directory (default /workspace)");
  list["workspace"] = schema::WorkspaceArg();
  list["limit"] = schema::Integer(
      fmt::format("Entries to show at most (default {}).", kDefaultListEntries), 1, 10000);
  tools.push_back(Tool{"file_list", "List a directory",
                       "List a directory in a workspace: type, size, permissions, modification "
                       "time and name of each entry, hidden ones included.",
                       schema::Object(list), ReadOnly(), List});

  json del = json::object();
  del["path"] = PathSchema("The file or directory to delete");
  del["recursive"] = schema::Boolean("Delete a directory with everything in it.");
  del["workspace"] = schema::WorkspaceArg();
  tools.push_back(Tool{"file_delete", "Delete a file",
                       "Delete a file, or a directory (with recursive: true when it is not "
                       "empty). There is no undo.",
                       schema::Object(del, {"path"}), Mutating(true, true), Delete});
  return tools;
}

}  // namespace berth::mcp
