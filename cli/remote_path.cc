#include "cli/remote_path.h"

#include <fmt/format.h>

namespace berth::cli {

Result<CpArg> ParseCpArg(std::string_view arg) {
  CpArg out;
  if (arg.empty()) return Fail(ErrorCode::kInvalidArgument, "empty path");
  if (arg == "-") {
    out.stdio = true;
    return out;
  }
  auto colon = arg.find(':');
  std::string_view prefix = colon == std::string_view::npos ? arg : arg.substr(0, colon);
  if (colon == std::string_view::npos || colon == 0 || prefix.find('/') != std::string_view::npos) {
    out.path = std::string(arg);
    return out;
  }
  std::string_view path = arg.substr(colon + 1);
  if (path.empty() || path[0] != '/') {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("'{}': a workspace path must be absolute, as in {}:/workspace/file "
                            "(write ./{} for a local file)",
                            arg, prefix, arg));
  }
  out.workspace = std::string(prefix);
  out.path = std::string(path);
  return out;
}

std::string BaseName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path == "/") return "";
  auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  if (out.empty() || out.back() != '/') out += '/';
  out += name;
  return out;
}

bool MeansContents(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return path == "." || path.ends_with("/.");
}

}  // namespace berth::cli
