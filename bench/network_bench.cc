// Guest network isolation's cost, measured where it is paid: a process running as a workspace
// uid (as passt does for a guest) talking to a sink in a test network namespace, through
// berthd's nftables rules (policy open: every packet walks the workspace chain) against the
// same process with the table removed, in one run, rounds interleaved. The guest-based figure
// (issue 11, "Benchmark") comes with a VM; this is the filter alone.
//
// Needs root. Prints a Markdown table; no packet leaves the machine (tests/support/netns_lab.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/bench_util.h"
#include "controller/network/firewall.h"
#include "controller/network/uid_range.h"
#include "tests/support/netns_lab.h"

using namespace berth;
using berth::bench::Clock;

namespace {

constexpr uid_t kUid = 2000000;
constexpr const char* kSink = "203.0.113.10";

int Connect() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(testing::kEchoPort);
  inet_pton(AF_INET, kSink, &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// In a child running as kUid: `mib` MiB into the sink; MB/s written to `out`.
double Throughput(int mib) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return 0;
  int rc = testing::NetnsLab::RunAs(kUid, [&] {
    int fd = Connect();
    if (fd < 0) return 1;
    std::vector<char> buf(1 << 20, 'x');
    buf[0] = 'S';  // the lab's echo server turns into a sink
    auto start = Clock::now();
    for (int i = 0; i < mib; ++i) {
      size_t off = 0;
      while (off < buf.size()) {
        ssize_t n = write(fd, buf.data() + off, buf.size() - off);
        if (n <= 0) return 2;
        off += static_cast<size_t>(n);
      }
      buf[0] = 'x';
    }
    shutdown(fd, SHUT_WR);
    char c;
    while (read(fd, &c, 1) > 0) {
    }
    double secs = bench::Millis(Clock::now() - start) / 1000.0;
    double mbps = mib * 1.048576 / secs;
    (void)!write(pipefd[1], &mbps, sizeof mbps);
    close(fd);
    return 0;
  }, std::chrono::seconds(120));
  double mbps = 0;
  close(pipefd[1]);
  if (rc != 0 || read(pipefd[0], &mbps, sizeof mbps) != sizeof mbps) mbps = 0;
  close(pipefd[0]);
  return mbps;
}

// In a child running as kUid: `n` connect() times in ms.
std::vector<double> ConnectTimes(int n) {
  int pipefd[2];
  std::vector<double> out(static_cast<size_t>(n));
  if (pipe(pipefd) != 0) return {};
  int rc = testing::NetnsLab::RunAs(kUid, [&] {
    for (int i = 0; i < n; ++i) {
      auto start = Clock::now();
      int fd = Connect();
      double ms = bench::Millis(Clock::now() - start);
      if (fd < 0) return 1;
      close(fd);
      (void)!write(pipefd[1], &ms, sizeof ms);
    }
    return 0;
  }, std::chrono::seconds(120));
  close(pipefd[1]);
  for (auto& v : out) {
    if (read(pipefd[0], &v, sizeof v) != sizeof v) rc = 1;
  }
  close(pipefd[0]);
  return rc == 0 ? out : std::vector<double>{};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"network_bench: berthd's uid-matched nftables rules against none, in one run"};
  int rounds = 5, mib = 512, connects = 500;
  app.add_option("--rounds", rounds, "interleaved rounds of each");
  app.add_option("--mib", mib, "MiB per throughput run");
  app.add_option("--connects", connects, "connections per connect-time round");
  CLI11_PARSE(app, argc, argv);
  auto lab = testing::NetnsLab::Get();
  if (!lab) {
    std::cerr << "network_bench: " << lab.error().message << "\n";
    return 1;
  }
  network::UidRange range{kUid - 0, 16};
  network::WorkspaceRules rules;
  rules.uid = kUid;
  rules.resolver = network::ResolverAddress(range, kUid);
  rules.policy.egress = network::Egress::kOpen;
  std::vector<double> thr_on, thr_off, conn_on, conn_off;
  for (int r = 0; r < rounds; ++r) {
    for (bool filtered : {true, false}) {
      (void)std::system("nft delete table inet berth 2>/dev/null");  // absent is fine
      if (filtered) {
        auto fw = network::Firewall::Install(range, {});
        if (!fw || !(*fw)->Apply(rules)) {
          std::cerr << "network_bench: cannot install the rules\n";
          return 1;
        }
      }
      double t = Throughput(mib);
      auto c = ConnectTimes(connects);
      if (t == 0 || c.empty()) {
        std::cerr << "network_bench: a run failed (filtered=" << filtered << ")\n";
        return 1;
      }
      (filtered ? thr_on : thr_off).push_back(t);
      auto& dst = filtered ? conn_on : conn_off;
      dst.insert(dst.end(), c.begin(), c.end());
    }
  }
  (void)std::system("nft delete table inet berth 2>/dev/null");
  auto median = [](std::vector<double> v) { return bench::Percentile(std::move(v), 50); };
  double t_on = median(thr_on), t_off = median(thr_off);
  std::cout << fmt::format("| measure ({} rounds, interleaved) | uid-filtered (policy open) | no rules | ratio |\n", rounds);
  std::cout << "|---|---|---|---|\n";
  std::cout << fmt::format("| TCP throughput, {} MiB into a sink, median MB/s | {:.0f} | {:.0f} | {:.3f}x |\n", mib,
                           t_on, t_off, t_on / t_off);
  for (double p : {50.0, 99.0}) {
    double on = bench::Percentile(conn_on, p), off = bench::Percentile(conn_off, p);
    std::cout << fmt::format("| connect() p{:.0f}, ms ({} connects) | {:.3f} | {:.3f} | {:+.3f} ms |\n", p,
                             conn_on.size(), on, off, on - off);
  }
  return 0;
}
