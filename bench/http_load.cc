#include "bench/http_load.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace berth::bench {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;
using Socket = asio::generic::stream_protocol::socket;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// What one connection gathered; merged once it is done, so the hot loop takes no lock.
struct Tally {
  std::vector<double> latencies_ms;
  uint64_t completed = 0;
  uint64_t errors = 0;
  std::string first_error;
  Clock::time_point first_start = Clock::time_point::max();
  Clock::time_point last_end = Clock::time_point::min();

  uint64_t wrong = 0;
  std::string first_wrong;

  void Error(std::string what) {
    ++errors;
    if (first_error.empty()) first_error = std::move(what);
  }
  void Wrong(std::string what) {
    ++wrong;
    if (first_wrong.empty()) first_wrong = std::move(what);
  }
};

// The plan every connection follows.
struct Plan {
  const LoadOptions& options;
  const AnswerCheck& check;
  Clock::time_point timed_from;  // duration mode
  Clock::time_point stop_at;     // duration mode
  bool count_mode() const { return options.requests > 0; }
};

asio::awaitable<boost::system::error_code> Connect(Socket& socket, const Endpoint& endpoint) {
  auto address = endpoint.ToAsio();
  if (!address) co_return asio::error::make_error_code(asio::error::invalid_argument);
  if (socket.is_open()) {
    boost::system::error_code ignored;
    socket.close(ignored);
  }
  auto [ec] = co_await socket.async_connect(*address, kTuple);
  if (!ec && endpoint.kind == Endpoint::Kind::kTcp) {
    int one = 1;
    setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  co_return ec;
}

// Sends `preamble` and reads its answer, which must be a 101; the bytes after it stay in
// `buffer`. An error message, or nullopt.
asio::awaitable<std::optional<std::string>> Upgrade(Socket& socket, boost::beast::flat_buffer& buffer,
                                                    const std::string& preamble) {
  auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(preamble), kTuple);
  if (wec) co_return fmt::format("write: {}", wec.message());
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64 * 1024);  // an error's JSON; a 101 has none
  auto [rec, rn] = co_await bhttp::async_read(socket, buffer, parser, kTuple);
  if (rec) co_return fmt::format("read: {}", rec.message());
  if (parser.get().result() != bhttp::status::switching_protocols) {
    co_return fmt::format("status {}: {}", parser.get().result_int(), parser.get().body().substr(0, 200));
  }
  co_return std::nullopt;
}

asio::awaitable<void> RunConnection(const LoadRequest& request, const Plan& plan, Socket& socket,
                                    Tally& tally) {
  boost::beast::flat_buffer buffer;
  bool connected = false;
  int sent = 0;
  const int total = plan.options.warmup_requests + plan.options.requests;
  for (;;) {
    auto start = Clock::now();
    if (plan.count_mode() ? sent >= total : start >= plan.stop_at) break;
    if (!connected) {
      auto ec = co_await Connect(socket, request.endpoint);
      if (ec) {
        tally.Error(fmt::format("connect {}: {}", request.endpoint.ToString(), ec.message()));
        // A server that refuses connections would otherwise be hammered in a tight loop.
        asio::steady_timer pause(socket.get_executor(), std::chrono::milliseconds(100));
        co_await pause.async_wait(kTuple);
        ++sent;
        continue;
      }
      buffer.clear();
      if (!request.preamble.empty()) {
        auto ec = co_await Upgrade(socket, buffer, request.preamble);
        if (ec) {
          tally.Error(fmt::format("upgrade through {}: {}", request.endpoint.ToString(), *ec));
          boost::system::error_code ignored;
          socket.close(ignored);
          asio::steady_timer pause(socket.get_executor(), std::chrono::milliseconds(100));
          co_await pause.async_wait(kTuple);
          ++sent;
          continue;
        }
      }
      connected = true;
      start = Clock::now();
    }
    ++sent;
    auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(request.wire), kTuple);
    if (wec) {
      tally.Error(fmt::format("write: {}", wec.message()));
      connected = false;
      continue;
    }
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(plan.options.max_body_bytes);
    auto [rec, rn] = co_await bhttp::async_read(socket, buffer, parser, kTuple);
    auto end = Clock::now();
    auto& response = parser.get();
    if (rec) {
      tally.Error(fmt::format("read: {}", rec.message()));
      connected = false;
      continue;
    }
    if (response.need_eof()) connected = false;  // the server closes after this answer
    Verdict verdict = plan.check(response.result_int(), response.body());
    if (verdict.kind == Verdict::Kind::kFailed) {
      tally.Error(std::move(verdict.what));
      continue;
    }
    if (verdict.kind == Verdict::Kind::kWrong) {
      tally.Wrong(std::move(verdict.what));
      continue;
    }
    ++tally.completed;
    bool timed = plan.count_mode() ? sent > plan.options.warmup_requests
                                   : end >= plan.timed_from && end <= plan.stop_at;
    if (timed) {
      tally.latencies_ms.push_back(Millis(end - start));
      tally.first_start = std::min(tally.first_start, start);
      tally.last_end = std::max(tally.last_end, end);
    }
  }
  boost::system::error_code ignored;
  socket.close(ignored);
}

}  // namespace

std::string FormatRequest(bhttp::verb method, const std::string& target, const std::string& host,
                          const std::string& token, const std::string& body,
                          const std::vector<std::string>& headers) {
  std::string wire = fmt::format("{} {} HTTP/1.1\r\nHost: {}\r\n",
                                 std::string(bhttp::to_string(method)), target, host);
  if (!token.empty()) wire += fmt::format("Authorization: Bearer {}\r\n", token);
  for (const auto& h : headers) wire += h + "\r\n";
  if (!body.empty()) {
    wire += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n", body.size());
  }
  wire += "\r\n" + body;
  return wire;
}

Verdict ExpectOk(int status, const std::string& body) {
  if (status == 200) return {};
  return {Verdict::Kind::kFailed, fmt::format("status {}: {}", status, body.substr(0, 200))};
}

Verdict ExpectExitZero(int status, const std::string& body) {
  if (status != 200) return ExpectOk(status, body);
  auto j = nlohmann::json::parse(body, nullptr, false);
  auto code = j.is_object() ? j.find("exit_code") : j.end();
  if (code == j.end() || !code->is_number_integer() || code->get<int>() != 0) {
    return {Verdict::Kind::kWrong, "exec did not exit 0: " + body.substr(0, 300)};
  }
  return {};
}

double LoadResult::Throughput() const {
  return seconds > 0 ? static_cast<double>(latencies_ms.size()) / seconds : 0;
}

LoadResult RunLoad(const std::vector<LoadRequest>& connections, const LoadOptions& options,
                   const AnswerCheck& check) {
  asio::io_context io(std::max(1, options.threads));
  auto begin = Clock::now();
  Plan plan{options, check, begin + options.warmup, begin + options.warmup + options.duration};
  std::vector<Tally> tallies(connections.size());
  std::vector<std::unique_ptr<Socket>> sockets;
  std::mutex mutex;
  std::condition_variable all_done;
  size_t done = 0;
  // Errors found outside the connections' coroutines (which own their tallies until done).
  Tally outside;
  for (size_t i = 0; i < connections.size(); ++i) {
    sockets.push_back(std::make_unique<Socket>(asio::make_strand(io)));
    Socket& socket = *sockets.back();
    asio::co_spawn(socket.get_executor(), RunConnection(connections[i], plan, socket, tallies[i]),
                   [&](std::exception_ptr failure) {
                     std::lock_guard lock(mutex);
                     if (failure) {
                       try {
                         std::rethrow_exception(failure);
                       } catch (const std::exception& e) {
                         outside.Error(fmt::format("a connection ended early: {}", e.what()));
                       }
                     }
                     if (++done == connections.size()) all_done.notify_all();
                   });
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < std::max(1, options.threads); ++i) threads.emplace_back([&] { io.run(); });
  {
    // Count mode has no expected end: a generous one, per timed request.
    auto expected = options.requests > 0
                        ? std::chrono::milliseconds(
                              100 * (options.warmup_requests + options.requests))
                        : options.warmup + options.duration;
    std::unique_lock lock(mutex);
    if (!all_done.wait_until(lock, begin + expected + options.grace,
                             [&] { return done == connections.size(); })) {
      // Closing each socket on its own strand ends whatever its coroutine waits for.
      for (auto& socket : sockets) {
        asio::post(socket->get_executor(), [s = socket.get()] {
          boost::system::error_code ignored;
          s->close(ignored);
        });
      }
      outside.Error(fmt::format("abandoned after {} s: the server stopped answering",
                                   std::chrono::duration_cast<std::chrono::seconds>(
                                       expected + options.grace).count()));
    }
  }
  for (auto& t : threads) t.join();
  tallies.push_back(std::move(outside));

  LoadResult result;
  auto first = Clock::time_point::max();
  auto last = Clock::time_point::min();
  for (auto& t : tallies) {
    result.latencies_ms.insert(result.latencies_ms.end(), t.latencies_ms.begin(),
                               t.latencies_ms.end());
    result.completed += t.completed;
    result.errors += t.errors;
    if (result.first_error.empty()) result.first_error = t.first_error;
    result.wrong += t.wrong;
    if (result.first_wrong.empty()) result.first_wrong = t.first_wrong;
    first = std::min(first, t.first_start);
    last = std::max(last, t.last_end);
  }
  if (options.requests > 0) {
    result.seconds = last > first ? std::chrono::duration<double>(last - first).count() : 0;
  } else {
    result.seconds = std::chrono::duration<double>(options.duration).count();
  }
  return result;
}

}  // namespace berth::bench
