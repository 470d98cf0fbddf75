// The load client of bench/run-preview-bench (issue 13): one leg of a measurement against one
// path to a guest's HTTP server, printed as one JSON line. The script runs it once per path and
// round, so every path gets the same client (bench/http_load.h: keep-alive connections, closed
// loop, answers parsed by Beast):
//   direct   a passt forward of the guest port     --connect tcp:127.0.0.1:P
//   tunnel   the agent's raw tunnel alone          --connect tcp:127.0.0.1:AGENT
//                                                  --tunnel-port N --tunnel-token-file TOKEN
//   preview  berthd's preview proxy                --connect tcp:127.0.0.1:BERTHD
//                                                  --host N-ws.preview.localhost:PORT
//                                                  --header-file FILE (X-Berth-Preview-Token)
// Secrets come from files, never the command line (any user on the host can read argv).
//
// Output: {"requests", "errors", "first_error", "wrong", "first_wrong", "seconds", "rps",
// "p50_ms", "p90_ms", "p99_ms", "max_ms", "mb_s", "latencies_ms"}; mb_s is body bytes of the
// timed answers over the timed window (10^6 bytes per second). Exit 1 when any request failed
// (after printing).
#include <signal.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/http_load.h"

namespace {

using namespace berth;
using namespace berth::bench;

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// "Name: value" lines of a file; blank lines skipped.
std::vector<std::string> HeaderLines(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(ReadWhole(path));
  std::string line;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (line.empty()) continue;
    if (line.find(':') == std::string::npos) throw std::runtime_error(path + ": not a header line");
    out.push_back(line);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"preview_load: one leg of bench/run-preview-bench (keep-alive GETs, closed loop)"};
  std::string connect, host = "localhost", target = "/", header_file, tunnel_token_file;
  int tunnel_port = 0, connections = 1, threads = 1, warmup = 20, requests = 200;
  uint64_t expect_bytes = 0, max_body = 8 << 20;
  int deadline_s = 600;
  app.add_option("--connect", connect, "tcp:127.0.0.1:PORT")->required();
  app.add_option("--host", host, "the Host header");
  app.add_option("--target", target, "the request target");
  app.add_option("--header-file", header_file, "extra request headers, one 'Name: value' a line");
  app.add_option("--tunnel-port", tunnel_port,
                 "open each connection as the agent's raw tunnel to this guest port first")
      ->check(CLI::Range(1, 65535));
  app.add_option("--tunnel-token-file", tunnel_token_file, "the agent's token (with --tunnel-port)");
  app.add_option("--connections", connections)->check(CLI::Range(1, 4096));
  app.add_option("--threads", threads)->check(CLI::Range(1, 16));
  app.add_option("--warmup", warmup, "untimed requests per connection")->check(CLI::Range(0, 1000000));
  app.add_option("--requests", requests, "timed requests per connection")->check(CLI::Range(1, 1000000));
  app.add_option("--expect-bytes", expect_bytes, "each answer's body is exactly this long (0: any)");
  app.add_option("--max-body", max_body, "largest body read");
  app.add_option("--deadline", deadline_s, "seconds before what still runs is abandoned")
      ->check(CLI::Range(1, 3600));
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);
  try {
    if (!connect.starts_with("tcp:127.")) throw std::runtime_error("--connect must be tcp:127.x.x.x:PORT (loopback only)");
    auto endpoint = Endpoint::Parse(connect);
    if (!endpoint) throw std::runtime_error("--connect: " + endpoint.error().message);
    std::vector<std::string> headers;
    if (!header_file.empty()) headers = HeaderLines(header_file);
    LoadRequest request{*endpoint, FormatRequest(http::bhttp::verb::get, target, host, "", "", headers), ""};
    if (tunnel_port != 0) {
      if (tunnel_token_file.empty()) throw std::runtime_error("--tunnel-port needs --tunnel-token-file");
      std::string token = Trim(ReadWhole(tunnel_token_file));
      request.preamble = fmt::format(
          "GET /v1/tunnel?port={} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n"
          "Connection: Upgrade\r\nUpgrade: berth-tcp\r\n\r\n",
          tunnel_port, connect.substr(4), token);
    }
    LoadOptions options;
    options.threads = threads;
    options.warmup_requests = warmup;
    options.requests = requests;
    options.max_body_bytes = std::max<uint64_t>(max_body, expect_bytes);
    // RunLoad's own expectation for count mode is 100 ms a request; the grace makes up the
    // rest of the deadline (a 64 MiB GET under TCG takes seconds).
    auto expected = std::chrono::milliseconds(100LL * (warmup + requests));
    options.grace = std::max(std::chrono::seconds(10),
                             std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::seconds(deadline_s) - expected));
    AnswerCheck check = [expect_bytes](int status, const std::string& body) -> Verdict {
      if (status != 200) return ExpectOk(status, body);
      if (expect_bytes != 0 && body.size() != expect_bytes) {
        return {Verdict::Kind::kWrong, fmt::format("{} bytes, expected {}", body.size(), expect_bytes)};
      }
      return {};
    };
    std::vector<LoadRequest> all(static_cast<size_t>(connections), request);
    auto result = RunLoad(all, options, check);
    const auto& l = result.latencies_ms;
    double bytes = static_cast<double>(l.size()) * static_cast<double>(expect_bytes);
    nlohmann::json out = {
        {"requests", l.size()},
        {"errors", result.errors},
        {"first_error", result.first_error},
        {"wrong", result.wrong},
        {"first_wrong", result.first_wrong},
        {"seconds", result.seconds},
        {"rps", result.Throughput()},
        {"p50_ms", l.empty() ? 0 : Percentile(l, 50)},
        {"p90_ms", l.empty() ? 0 : Percentile(l, 90)},
        {"p99_ms", l.empty() ? 0 : Percentile(l, 99)},
        {"max_ms", l.empty() ? 0 : Percentile(l, 100)},
        {"mb_s", result.seconds > 0 ? bytes / result.seconds / 1e6 : 0},
        {"latencies_ms", l},
    };
    // Error bodies are cut at 200 bytes, maybe inside a UTF-8 sequence: replaced, not thrown.
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return result.errors == 0 && result.wrong == 0 && !l.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "preview_load: " << e.what() << std::endl;
    return 2;
  }
}
