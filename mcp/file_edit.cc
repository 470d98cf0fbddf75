#include "mcp/file_edit.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/protocol/exec.h"

namespace berth::mcp {
namespace {

constexpr size_t kMaxLinesReported = 20;

std::vector<size_t> FindAll(std::string_view content, std::string_view needle) {
  std::vector<size_t> positions;
  for (size_t at = content.find(needle); at != std::string_view::npos;
       at = content.find(needle, at + needle.size())) {
    positions.push_back(at);
  }
  return positions;
}

// Line numbers (1-based) of `positions`, which are ascending.
std::vector<size_t> LinesOf(std::string_view content, const std::vector<size_t>& positions) {
  std::vector<size_t> lines;
  size_t line = 1;
  size_t scanned = 0;
  for (size_t pos : positions) {
    if (lines.size() == kMaxLinesReported) break;
    line += static_cast<size_t>(std::count(content.begin() + scanned, content.begin() + pos, '\n'));
    scanned = pos;
    lines.push_back(line);
  }
  return lines;
}

// `text` with every run of spaces and tabs squeezed to nothing: a match that only appears
// this way means the caller got the indentation wrong.
std::string WithoutBlanks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c != ' ' && c != '\t' && c != '\r') out.push_back(c);
  }
  return out;
}

}  // namespace

Result<EditOutcome> ApplyEdit(std::string_view content, std::string_view old_string,
                              std::string_view new_string, bool replace_all) {
  if (old_string.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "old_string is empty; to create or overwrite a whole file use file_write");
  }
  if (old_string == new_string) {
    return Fail(ErrorCode::kInvalidArgument, "old_string and new_string are the same: nothing to do");
  }
  auto positions = FindAll(content, old_string);
  if (positions.empty()) {
    std::string hint;
    bool crlf_file = content.find("\r\n") != std::string_view::npos;
    bool crlf_old = old_string.find("\r\n") != std::string_view::npos;
    if (crlf_file && !crlf_old && old_string.find('\n') != std::string_view::npos) {
      hint = "; the file has CRLF (\\r\\n) line endings, old_string has \\n";
    } else if (WithoutBlanks(content).find(WithoutBlanks(old_string)) != std::string::npos) {
      hint = "; it would match if spaces and tabs were ignored: check the indentation";
    }
    return Fail(ErrorCode::kNotFound,
                fmt::format("old_string does not occur in the file{}; read the file again "
                            "(file_read) and copy the text exactly",
                            hint));
  }
  auto lines = LinesOf(content, positions);
  if (positions.size() > 1 && !replace_all) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("old_string occurs {} times (lines {}{}); include more of the "
                            "surrounding text to make it unique, or set replace_all to replace "
                            "every occurrence",
                            positions.size(), fmt::join(lines, ", "),
                            positions.size() > lines.size() ? ", ..." : ""));
  }
  EditOutcome outcome;
  outcome.replacements = positions.size();
  outcome.lines = std::move(lines);
  outcome.content.reserve(content.size() + positions.size() * new_string.size());
  size_t from = 0;
  for (size_t pos : positions) {
    outcome.content.append(content.substr(from, pos - from));
    outcome.content.append(new_string);
    from = pos + old_string.size();
  }
  outcome.content.append(content.substr(from));
  return outcome;
}

bool LooksBinary(std::string_view data) {
  if (data.find('\0') != std::string_view::npos) return true;
  return !protocol::IsValidUtf8(data.substr(0, protocol::CompleteUtf8Prefix(data)));
}

std::string ResolveGuestPath(std::string_view path) {
  if (path.starts_with('/')) return std::string(path);
  while (path.starts_with("./")) path.remove_prefix(2);
  if (path.empty() || path == ".") return "/workspace";
  return fmt::format("/workspace/{}", path);
}

}  // namespace berth::mcp
