#include "mcp/stdio_lines.h"

namespace berth::mcp {

LineReader::Outcome LineReader::Next(std::string& line) {
  line.clear();
  bool too_long = false;
  bool any = false;
  for (;;) {
    int c = in_.sbumpc();
    if (c == std::char_traits<char>::eof()) {
      if (!any) return Outcome::kEof;
      break;
    }
    any = true;
    if (c == '\n') break;
    if (too_long) continue;
    if (line.size() >= max_) {
      too_long = true;
      line.clear();
      line.shrink_to_fit();
      continue;
    }
    line.push_back(static_cast<char>(c));
  }
  if (too_long) return Outcome::kTooLong;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return Outcome::kLine;
}

}  // namespace berth::mcp
