// The arguments of `berth cp`: "WS:/path" names a path in a workspace, "-" stdin or stdout,
// anything else a local path ("./a:b" for a local name with a colon in it).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace berth::cli {

struct CpArg {
  std::optional<std::string> workspace;  // set: a remote path
  std::string path;                      // remote: absolute; local: as given
  bool stdio = false;                    // "-"
  bool remote() const { return workspace.has_value(); }
};

// "WS:/path" is remote when WS is non-empty and has no '/'; its path must be absolute
// (invalid_argument otherwise, so that a typo is not taken for a local file).
Result<CpArg> ParseCpArg(std::string_view arg);

// The last component of a path, trailing slashes ignored ("/a/b/" → "b", "/" → "").
std::string BaseName(std::string_view path);
// dir + "/" + name without doubling the slash.
std::string JoinPath(std::string_view dir, std::string_view name);
// True for "dir/." and "dir/./": copy the directory's contents rather than the directory.
bool MeansContents(std::string_view path);

}  // namespace berth::cli
