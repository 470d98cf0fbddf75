// Reading newline-delimited messages with a bound on their size, for the stdio transport.
#pragma once

#include <cstddef>
#include <streambuf>
#include <string>

namespace berth::mcp {

// The largest message the stdio transport takes: file_write's 10 MiB of content with room for
// JSON escaping.
inline constexpr size_t kMaxStdioLineBytes = 32u << 20;

class LineReader {
 public:
  enum class Outcome { kLine, kTooLong, kEof };
  LineReader(std::streambuf& in, size_t max) : in_(in), max_(max) {}
  // The next line, without its "\n" (and without a "\r" before it). kTooLong: the line was
  // longer than `max`; it is skipped to its end and `line` is empty. A last line without a
  // newline is still a line.
  Outcome Next(std::string& line);

 private:
  std::streambuf& in_;
  size_t max_;
};

}  // namespace berth::mcp
