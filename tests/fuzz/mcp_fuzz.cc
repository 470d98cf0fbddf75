// Fuzz target for the MCP server's JSON-RPC handling, both transports' parsing: each input is
// one stdio message stream (lines) and one HTTP body, handled by a real McpSession (initialize,
// batches, tools/list, tools/call with argument validation) whose tools call Berth through a
// FakeBackend (workspaces, processes and files in memory). The same
// bytes go through the pure parts: ParseJson, Classify, ValidateArguments against every
// tool's schema, ParseBaseUrl, ApplyEdit, the UTF-8 cutters and the stdio line reader.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "common/json.h"
#include "mcp/arguments.h"
#include "mcp/base_url.h"
#include "mcp/fake_backend.h"
#include "mcp/file_edit.h"
#include "mcp/json_rpc.h"
#include "mcp/session.h"
#include "mcp/stdio_lines.h"
#include "mcp/text_limits.h"
#include "mcp/tool.h"

namespace {

using namespace berth;

mcp::McpSession& Session() {
  static mcp::McpSession* session = [] {
    spdlog::set_level(spdlog::level::off);
    // Berth in memory: the tools run to their answers (and their failures) in microseconds.
    return new mcp::McpSession(std::make_shared<mcp::FakeBackend>(), "");
  }();
  return *session;
}

void FuzzPure(std::string_view text) {
  auto parsed = ParseJson(text);
  if (parsed) {
    (void)DumpJson(*parsed);
    auto classified = mcp::jsonrpc::Classify(*parsed);
    (void)classified;
    // Arguments as tools/call would pass them: the whole value and its params.arguments.
    const nlohmann::json* args = &*parsed;
    if (parsed->is_object()) {
      auto params = parsed->find("params");
      if (params != parsed->end() && params->is_object()) {
        auto a = params->find("arguments");
        if (a != params->end()) args = &*a;
      }
    }
    for (const auto& tool : mcp::AllTools()) (void)mcp::ValidateArguments(tool.input_schema, *args);
  } else {
    (void)mcp::jsonrpc::ParseErrorResponse(parsed.error());
  }
  (void)mcp::ParseBaseUrl(text);
  (void)mcp::LooksBinary(text);
  (void)mcp::ResolveGuestPath(text);
  (void)mcp::Utf8Prefix(text, text.size() / 2);
  (void)mcp::Utf8Suffix(text, text.size() / 3);
  mcp::HeadTail head_tail(64);
  head_tail.Append(text);
  (void)head_tail.Render();
  // An edit: the input split in three at its first two NUL bytes (content, old, new).
  auto first = text.find('\0');
  if (first != std::string_view::npos) {
    auto second = text.find('\0', first + 1);
    if (second != std::string_view::npos) {
      (void)mcp::ApplyEdit(text.substr(second + 1), text.substr(0, first),
                           text.substr(first + 1, second - first - 1), (text.size() & 1) != 0);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256 * 1024) return 0;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  FuzzPure(bytes);
  mcp::McpSession& session = Session();
  // HTTP: the whole input is one body.
  (void)session.HandleText(bytes);
  // stdio: one message per line, at most 64 (each may be a tool call that fails to connect).
  std::istringstream in{std::string(bytes)};
  mcp::LineReader reader(*in.rdbuf(), 64 * 1024);
  std::string line;
  for (int i = 0; i < 64; ++i) {
    auto got = reader.Next(line);
    if (got == mcp::LineReader::Outcome::kEof) break;
    if (got == mcp::LineReader::Outcome::kLine) {
      FuzzPure(line);
      (void)session.HandleText(line);
    }
  }
  return 0;
}
