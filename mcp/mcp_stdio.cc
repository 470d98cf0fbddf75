// The stdio transport: newline-delimited JSON-RPC on stdin/stdout. Lines are read on the
// calling thread; tools/call requests run on a few worker threads so a long exec does not hold
// up pings or other calls; every response is written whole, on one line, under a lock.
#include <istream>
#include <mutex>
#include <ostream>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "mcp/base_url.h"
#include "mcp/http_backend.h"
#include "mcp/mcp_server.h"
#include "mcp/session.h"
#include "mcp/stdio_lines.h"

namespace berth::mcp {
namespace {

// Tool calls in flight at once; more wait their turn.
constexpr size_t kWorkers = 4;

bool IsToolCall(const nlohmann::json& payload) {
  return payload.is_object() && payload.contains("id") && payload.contains("method") &&
         payload["method"] == "tools/call";
}

}  // namespace

int RunStdio(const McpConfig& config, std::istream& in, std::ostream& out) {
  // stdout belongs to the protocol: anything logged goes to stderr.
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("berth-mcp", sink));
  auto endpoint = ParseBaseUrl(config.url);
  if (!endpoint) {
    fmt::print(stderr, "berth mcp: bad berthd URL: {}\n", endpoint.error().message);
    return 1;
  }
  if (config.api_key.empty()) {
    fmt::print(stderr, "berth mcp: warning: no API key; berthd will refuse the tools' calls\n");
  }
  McpSession session(std::make_shared<HttpBackend>(*endpoint, config.api_key),
                     config.default_workspace);

  std::mutex out_mutex;
  auto send = [&](const nlohmann::json& message) {
    std::string line = jsonrpc::Dump(message);
    line.push_back('\n');
    std::lock_guard lock(out_mutex);
    out.write(line.data(), static_cast<std::streamsize>(line.size()));
    out.flush();
  };

  boost::asio::thread_pool workers(kWorkers);
  LineReader reader(*in.rdbuf(), kMaxStdioLineBytes);
  std::string line;
  for (;;) {
    auto got = reader.Next(line);
    if (got == LineReader::Outcome::kEof) break;
    if (got == LineReader::Outcome::kTooLong) {
      send(jsonrpc::Error(nullptr, jsonrpc::kInvalidRequest,
                          fmt::format("Invalid Request: message over {} bytes", kMaxStdioLineBytes)));
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    auto payload = ParseJson(line);
    if (!payload) {
      send(jsonrpc::ParseErrorResponse(payload.error()));
      continue;
    }
    if (IsToolCall(*payload)) {
      boost::asio::post(workers, [&session, &send, payload = std::move(*payload)] {
        if (auto response = session.Handle(payload)) send(*response);
      });
      continue;
    }
    if (auto response = session.Handle(*payload)) send(*response);
  }
  // EOF: the client is gone or done; let calls in flight finish (their effects are real).
  workers.join();
  return 0;
}

}  // namespace berth::mcp
