// file_edit's replacement logic and the text helpers of the file and exec tools. Pure.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "mcp/file_edit.h"
#include "mcp/text_limits.h"

using namespace berth;
using namespace berth::mcp;

TEST_CASE("ApplyEdit replaces a unique string", "[mcp][edit]") {
  auto edited = ApplyEdit("int main() {\n  return 1;\n}\n", "return 1;", "return 0;", false);
  REQUIRE(edited);
  CHECK(edited->content == "int main() {\n  return 0;\n}\n");
  CHECK(edited->replacements == 1);
  CHECK(edited->lines == std::vector<size_t>{2});
}

TEST_CASE("ApplyEdit refuses a string that is not there", "[mcp][edit]") {
  auto edited = ApplyEdit("alpha\nbeta\n", "gamma", "delta", false);
  REQUIRE_FALSE(edited);
  CHECK(edited.error().code == ErrorCode::kNotFound);
  CHECK(edited.error().message.find("does not occur") != std::string::npos);
}

TEST_CASE("ApplyEdit refuses a string found more than once, naming the lines", "[mcp][edit]") {
  std::string content = "x = 1\ny = 2\nx = 1\n";
  auto edited = ApplyEdit(content, "x = 1", "x = 3", false);
  REQUIRE_FALSE(edited);
  CHECK(edited.error().code == ErrorCode::kFailedPrecondition);
  CHECK(edited.error().message.find("2 times") != std::string::npos);
  CHECK(edited.error().message.find("lines 1, 3") != std::string::npos);
  CHECK(edited.error().message.find("replace_all") != std::string::npos);

  auto all = ApplyEdit(content, "x = 1", "x = 3", true);
  REQUIRE(all);
  CHECK(all->content == "x = 3\ny = 2\nx = 3\n");
  CHECK(all->replacements == 2);
  CHECK(all->lines == std::vector<size_t>{1, 3});
}

TEST_CASE("ApplyEdit counts occurrences without overlap", "[mcp][edit]") {
  auto edited = ApplyEdit("aaaa", "aa", "b", true);
  REQUIRE(edited);
  CHECK(edited->content == "bb");
  CHECK(edited->replacements == 2);
  // "aaa" holds "aa" once without overlap.
  auto once = ApplyEdit("aaa", "aa", "b", false);
  REQUIRE(once);
  CHECK(once->content == "ba");
}

TEST_CASE("ApplyEdit refuses empty and no-op edits", "[mcp][edit]") {
  auto empty = ApplyEdit("abc", "", "x", false);
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code == ErrorCode::kInvalidArgument);
  CHECK(empty.error().message.find("file_write") != std::string::npos);
  auto same = ApplyEdit("abc", "b", "b", false);
  REQUIRE_FALSE(same);
  CHECK(same.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("ApplyEdit explains near misses: line endings, indentation", "[mcp][edit]") {
  auto crlf = ApplyEdit("a\r\nb\r\n", "a\nb", "c", false);
  REQUIRE_FALSE(crlf);
  CHECK(crlf.error().message.find("CRLF") != std::string::npos);
  auto indent = ApplyEdit("if x:\n    y()\n", "if x:\n  y()", "z", false);
  REQUIRE_FALSE(indent);
  CHECK(indent.error().message.find("indentation") != std::string::npos);
}

TEST_CASE("ApplyEdit handles replacements at the edges and with the empty string", "[mcp][edit]") {
  auto start = ApplyEdit("head middle tail", "head ", "", false);
  REQUIRE(start);
  CHECK(start->content == "middle tail");
  auto end = ApplyEdit("head middle tail", " tail", "!", false);
  REQUIRE(end);
  CHECK(end->content == "head middle!");
  auto whole = ApplyEdit("x", "x", "yy", false);
  REQUIRE(whole);
  CHECK(whole->content == "yy");
}

TEST_CASE("LooksBinary: NUL bytes or invalid UTF-8, a cut character is fine", "[mcp][edit]") {
  CHECK_FALSE(LooksBinary("plain text\n"));
  CHECK_FALSE(LooksBinary("caf\xc3\xa9"));
  CHECK_FALSE(LooksBinary(std::string_view("caf\xc3", 4)));  // cut mid-character
  CHECK(LooksBinary(std::string_view("a\0b", 3)));
  CHECK(LooksBinary("\xff\xfe\x00\x01"));
  CHECK(LooksBinary("\x89PNG\r\n\x1a\n"));
}

TEST_CASE("ResolveGuestPath: relative paths live under /workspace", "[mcp][edit]") {
  CHECK(ResolveGuestPath("/etc/hosts") == "/etc/hosts");
  CHECK(ResolveGuestPath("src/main.c") == "/workspace/src/main.c");
  CHECK(ResolveGuestPath("./notes.md") == "/workspace/notes.md");
  CHECK(ResolveGuestPath("") == "/workspace");
  CHECK(ResolveGuestPath(".") == "/workspace");
}

TEST_CASE("HeadTail keeps the start and the end of long output", "[mcp][text]") {
  HeadTail small(100);
  small.Append("hello ");
  small.Append("world");
  CHECK(small.Render() == "hello world");
  CHECK_FALSE(small.truncated());

  HeadTail big(100);  // 25 bytes of head, 75 of tail
  std::string data;
  for (int i = 0; i < 1000; ++i) data += static_cast<char>('a' + i % 26);
  for (size_t i = 0; i < data.size(); i += 7) big.Append(std::string_view(data).substr(i, 7));
  CHECK(big.total() == 1000);
  CHECK(big.truncated());
  std::string rendered = big.Render();
  CHECK(rendered.starts_with(data.substr(0, 25)));
  CHECK(rendered.ends_with(data.substr(1000 - 75)));
  CHECK(rendered.find("[... 900 bytes left out ...]") != std::string::npos);
}

TEST_CASE("HeadTail cuts at line ends when one is near", "[mcp][text]") {
  HeadTail lines(40);  // 10 bytes of head, 30 of tail
  std::string data;
  for (int i = 0; i < 100; ++i) data += fmt::format("{:03}\n", i);  // 4 bytes a line
  lines.Append(data);
  std::string rendered = lines.Render();
  CHECK(rendered.starts_with("000\n001\n[... "));
  CHECK(rendered.ends_with("093\n094\n095\n096\n097\n098\n099\n"));
  CHECK(rendered.find("bytes left out ...]\n093\n") != std::string::npos);
}

TEST_CASE("UTF-8 aware cuts never split a character", "[mcp][text]") {
  std::string e = "\xc3\xa9";  // é
  std::string text = e + e + e;  // 6 bytes
  CHECK(Utf8Prefix(text, 3) == e);
  CHECK(Utf8Prefix(text, 4) == e + e);
  CHECK(Utf8Suffix(text, 3) == e);
  CHECK(Utf8Suffix(text, 5) == e + e);
  CHECK(Utf8Suffix(text, 10) == text);
}
