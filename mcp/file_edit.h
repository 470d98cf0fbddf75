// The pure parts of the file tools: replacing a unique string (file_edit), telling text from
// binary, and resolving the paths a model writes. No I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace berth::mcp {

struct EditOutcome {
  EditOutcome() = default;
  std::string content;
  size_t replacements = 0;
  std::vector<size_t> lines;  // 1-based line of each replacement in the old content (first 20)
};

// Replaces `old_string` by `new_string` in `content`. Without `replace_all` it must occur
// exactly once: not_found when it does not occur (saying so when it would match with other
// line endings or indentation), failed_precondition when it occurs more than once (with the
// lines, so the caller can add context). invalid_argument when `old_string` is empty or equal
// to `new_string`. Occurrences are counted without overlap, left to right.
Result<EditOutcome> ApplyEdit(std::string_view content, std::string_view old_string,
                              std::string_view new_string, bool replace_all);

// True when `data` is not text a model can read: it has a NUL byte or is not UTF-8. A UTF-8
// sequence cut at the end (a read that stopped mid-character) does not count.
bool LooksBinary(std::string_view data);

// A path as the tools take it: absolute, or relative to /workspace (the durable disk).
std::string ResolveGuestPath(std::string_view path);

}  // namespace berth::mcp
