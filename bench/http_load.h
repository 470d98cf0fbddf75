// A closed-loop HTTP/1.1 load generator for the benchmarks: N keep-alive connections, each
// sending its request again as soon as the previous answer has been read, on a few threads.
// Requests are serialized once up front and answers parsed by Beast, so the client spends
// little CPU per request and leaves the cores to the server being measured. Works over any
// Endpoint (TCP to berthd, a unix socket straight to an agent): the same code on both paths.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/endpoint.h"
#include "common/http/types.h"

namespace berth::bench {

// One connection's work: where to connect and the request it sends, again and again.
struct LoadRequest {
  Endpoint endpoint;
  std::string wire;  // the whole request as bytes (FormatRequest)
  // Unless empty, sent once on every new connection before the first request, and answered
  // 101: an upgrade to a raw tunnel (the agent's GET /v1/tunnel with `Upgrade: berth-tcp`),
  // after which `wire` goes to whatever is behind it. Not timed.
  std::string preamble;
};

// A keep-alive HTTP/1.1 request: `method target`, Host, a bearer `token` unless empty, each of
// `headers` ("Name: value" lines without CRLF), and a JSON `body` unless empty.
std::string FormatRequest(http::bhttp::verb method, const std::string& target,
                          const std::string& host, const std::string& token,
                          const std::string& body = "",
                          const std::vector<std::string>& headers = {});

// What one answer was.
struct Verdict {
  enum class Kind {
    kRight,
    kWrong,   // a well-formed success whose content is wrong (the server's peer misbehaved)
    kFailed,  // an error status
  };
  Kind kind = Kind::kRight;
  std::string what;  // why, unless right
};
using AnswerCheck = std::function<Verdict(int status, const std::string& body)>;
// 200 and nothing else.
Verdict ExpectOk(int status, const std::string& body);
// 200 and a JSON body with "exit_code": 0 (an exec in wait mode); a 200 with another exit code
// (or none) is wrong, not failed.
Verdict ExpectExitZero(int status, const std::string& body);

struct LoadOptions {
  int threads = 1;  // running the client's io_context
  // Count mode (requests > 0): each connection sends `warmup_requests` untimed requests, then
  // `requests` timed ones.
  int warmup_requests = 0;
  int requests = 0;
  // Duration mode (requests == 0): answers that arrive from `warmup` after the start until
  // `warmup + duration` are timed; connections send nothing new after that.
  std::chrono::milliseconds warmup{0};
  std::chrono::milliseconds duration{0};
  // Whatever is still running this long after the expected end is abandoned (its sockets
  // closed) and counted as errors, so a wedged server cannot hang the benchmark.
  std::chrono::seconds grace{60};
  // Largest answer body read (Beast's own default for responses is 8 MiB); larger ones fail.
  uint64_t max_body_bytes = 8 << 20;
};

struct LoadResult {
  std::vector<double> latencies_ms;  // timed requests that were answered right
  uint64_t completed = 0;            // every right answer, warm-up included
  uint64_t errors = 0;               // error statuses, failed connections, abandoned requests
  std::string first_error;
  uint64_t wrong = 0;                // well-formed answers with the wrong content (not timed)
  std::string first_wrong;
  double seconds = 0;  // the timed window: from the first to the last timed answer's end
                       // (count mode), or the configured duration (duration mode)
  // Timed answers per second.
  double Throughput() const;
};

// Runs the load; one connection per element of `connections`. Blocks until every connection
// is done. Transport errors reconnect (and count); error statuses and wrong answers count and
// the connection goes
// on. Any thread; uses its own io_context and threads.
LoadResult RunLoad(const std::vector<LoadRequest>& connections, const LoadOptions& options,
                   const AnswerCheck& check);

}  // namespace berth::bench
