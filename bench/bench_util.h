// Small helpers for the benchmarks: timing, percentiles, child processes, a byte-counting sink.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace berth::bench {

using Clock = std::chrono::steady_clock;

double Millis(Clock::duration d);
// Nearest-rank percentile of `samples` (ms); `p` in 0..100.
double Percentile(std::vector<double> samples, double p);

// Starts argv[0] (PATH lookup) with stdin, stdout and stderr on /dev/null unless `verbose`.
pid_t Spawn(const std::vector<std::string>& argv, bool verbose = false);
// Waits for the child; its exit code, 128+N for a signal.
int Wait(pid_t pid);
// Spawn + Wait.
int Run(const std::vector<std::string>& argv, bool verbose = false);

// A free TCP port on 127.0.0.1 at the time of the call.
uint16_t FreePort();
// Connects to 127.0.0.1:port; -1 on failure.
int ConnectLoopback(uint16_t port);
bool WaitForPort(uint16_t port, std::chrono::seconds limit);

// A TCP listener on 127.0.0.1 (port chosen by the kernel) whose thread hands each accepted
// connection, one at a time, to `serve` and closes it afterwards.
class LoopbackServer {
 public:
  LoopbackServer(const char* what, std::function<void(int fd)> serve);
  ~LoopbackServer();
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A TCP server on 127.0.0.1 that serves one connection at a time: reads until EOF counting
// bytes, answers with the count as 8 bytes, closes.
class SinkServer {
 public:
  SinkServer();
  uint16_t port() const { return server_.port(); }

 private:
  LoopbackServer server_;
};

// The least a relay can do, to tell a relay's own cost from the cost of relaying at all: a
// listener on 127.0.0.1 that, for one connection at a time, connects to 127.0.0.1:target and
// moves the client's bytes there with blocking splice(2) through a 1 MiB pipe (no protocol, no
// event loop, no copy into user space), then copies the target's answer back.
class SpliceRelay {
 public:
  explicit SpliceRelay(uint16_t target);
  uint16_t port() const { return server_.port(); }

 private:
  LoopbackServer server_;
};

// Sends `bytes` to 127.0.0.1:port from a 1 MiB buffer, half-closes, waits for the sink's
// count. Returns MB/s (10^6 bytes per second) or a negative number when the count is wrong.
double SendToSink(uint16_t port, uint64_t bytes);
// The same over an already connected socket `fd` (not closed here); `start` is when the
// measurement began (so a handshake can count).
double SendThroughSocket(int fd, uint64_t bytes, Clock::time_point start);

}  // namespace berth::bench
