// berth-agent against ssh, scp and a direct TCP connection, in one run on loopback. Started by
// bench/run-agent-bench, which provides a running agent (TCP) and a throwaway sshd.
//
// What is measured, and how:
//  - exec round trip of `true` (the sshd is told not to run root's ~/.bashrc, so the ssh figures
//    are ssh's own): the client library (ApiClient::Json, a new TCP connection per
//    call, as the CLI does) and curl (a new process per call, like `ssh … true`), against
//    `ssh root@127.0.0.1 true` on a new connection and through a ControlMaster that is
//    already up. p50/p95 over --exec-iterations calls after warm-up calls.
//  - upload of --upload-mib MiB from tmpfs: PUT /v1/files through the client library's
//    streaming Stream() call, against `scp`, to a directory on disk and to one on tmpfs. The
//    agent fsyncs every upload before it answers; scp does not.
//  - tunnel throughput: --tunnel-mib MiB into a byte-counting sink, against a direct connection
//    to the sink, through:
//      - a raw tunnel opened by the client library (OpenRawTunnel → agent → sink: one relay,
//        the agent's splice pump), what a program using the library gets;
//      - PortForwarder in raw mode (local listener → raw tunnel → agent → sink: two relays),
//        what `berth port-forward` gives any program;
//      - PortForwarder in WebSocket mode (the same two relays, framed and masked);
//      - `ssh -L`;
//      - a bare splice relay (bench_util's SpliceRelay: blocking splice, nothing else), the
//        floor of what any relay costs on this machine, so the agent's own overhead shows
//        apart from the cost of a second TCP connection.
//    Each timed run includes opening the connection (and the tunnel). The paths take turns in
//    each of the --repeats rounds, so load that comes and goes hits them alike; the best run of
//    each path is kept.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/bench_util.h"
#include "common/client/api_client.h"
#include "common/client/tunnel.h"
#include "common/http/url.h"

namespace {

using namespace berth;
using namespace berth::bench;
using http::bhttp::verb;

struct Config {
  std::string agent = "tcp:127.0.0.1:7000";
  std::string token_file;
  uint16_t ssh_port = 0;
  std::string ssh_key;
  std::string work_dir;  // on disk
  std::string shm_dir;   // on tmpfs
  int exec_iterations = 100;
  int ssh_iterations = 30;
  int upload_mib = 512;
  int tunnel_mib = 1024;
  int repeats = 3;
  std::string out;
  std::string sections = "exec,upload,tunnel";
  pid_t agent_pid = 0;  // for the CPU the agent spends on tunnels; 0: not counted
};

struct Latency {
  double p50 = 0, p95 = 0;
};

Latency Measure(int warmup, int iterations, const std::function<bool()>& call) {
  for (int i = 0; i < warmup; ++i) {
    if (!call()) throw std::runtime_error("warm-up call failed");
  }
  std::vector<double> samples;
  for (int i = 0; i < iterations; ++i) {
    auto start = Clock::now();
    if (!call()) throw std::runtime_error("timed call failed");
    samples.push_back(Millis(Clock::now() - start));
  }
  return {Percentile(samples, 50), Percentile(samples, 95)};
}

// The best of `repeats` throughput runs (MB/s): the least disturbed by other load.
double Best(int repeats, const std::function<double()>& run) {
  double best = 0;
  for (int i = 0; i < repeats; ++i) {
    double r = run();
    if (r < 0) throw std::runtime_error("throughput run failed");
    best = std::max(best, r);
  }
  return best;
}

std::vector<std::string> SshBase(const Config& c, const std::string& tool = "ssh") {
  return {tool, tool == "scp" ? "-P" : "-p", std::to_string(c.ssh_port), "-i", c.ssh_key,
          "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o",
          "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o",
          "IdentitiesOnly=yes"};
}

std::vector<std::string> Plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string Verdict(bool ok) { return ok ? "meets the bar" : "MISSES the bar"; }

struct Report {
  std::string text;
  void Line(const std::string& s) {
    std::cout << s << std::endl;
    text += s + "\n";
  }
};

double UploadWithAgent(client::ApiClient& client, const std::string& source,
                       const std::string& dest) {
  int fd = open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  fstat(fd, &st);
  auto start = Clock::now();
  auto status = client.Stream(
      verb::put, "/v1/files" + http::PercentEncode(dest), {{"Content-Type", "application/octet-stream"}},
      [fd](char* buf, size_t size) -> Result<size_t> {
        ssize_t n = read(fd, buf, size);
        if (n < 0) return Fail(ErrnoError(errno, "read source"));
        return static_cast<size_t>(n);
      },
      static_cast<uint64_t>(st.st_size), [](std::string_view) -> Status { return {}; });
  auto elapsed = Clock::now() - start;
  close(fd);
  if (!status) throw std::runtime_error("agent PUT /v1/files: " + status.error().message);
  std::error_code ec;
  if (std::filesystem::file_size(dest, ec) != static_cast<uint64_t>(st.st_size)) return -1;
  std::filesystem::remove(dest);
  return static_cast<double>(st.st_size) / 1e6 / std::chrono::duration<double>(elapsed).count();
}

double UploadWithScp(const Config& c, const std::string& source, const std::string& dest) {
  uint64_t size = std::filesystem::file_size(source);
  auto start = Clock::now();
  int rc = Run(Plus(SshBase(c, "scp"), {"-q", source, "root@127.0.0.1:" + dest}));
  auto elapsed = Clock::now() - start;
  if (rc != 0 || std::filesystem::file_size(dest) != size) return -1;
  std::filesystem::remove(dest);
  return static_cast<double>(size) / 1e6 / std::chrono::duration<double>(elapsed).count();
}

// CPU seconds (user + system) used so far by this process (sender, sink and forwarder threads)
// and by the agent. Softirq work (TCP receive on loopback) counts for whichever of them was on
// the CPU, which on a quiet machine is one of these.
double CpuSeconds(pid_t agent_pid) {
  rusage self {};
  getrusage(RUSAGE_SELF, &self);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  double total = seconds(self.ru_utime) + seconds(self.ru_stime);
  if (agent_pid > 0) {
    std::ifstream stat(fmt::format("/proc/{}/stat", agent_pid));
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // Fields after the command name (which may hold spaces) start after the last ')'.
    std::istringstream rest(text.substr(text.rfind(')') + 2));
    std::vector<std::string> fields{std::istream_iterator<std::string>(rest), {}};
    if (fields.size() > 12) {
      total += (std::stod(fields[11]) + std::stod(fields[12])) /
               static_cast<double>(sysconf(_SC_CLK_TCK));  // utime, stime
    }
  }
  return total;
}

// SendToSink through a raw tunnel the client library opens: a program that uses the library
// instead of a local port. Opening the tunnel is part of the time, as connect() is for direct.
double SendThroughRawTunnel(client::ApiClient& client, uint16_t port, uint64_t bytes) {
  auto start = Clock::now();
  auto tunnel = tunnel::OpenRawTunnel(client, "/v1", port);
  if (!tunnel) throw std::runtime_error("raw tunnel: " + tunnel.error().message);
  return SendThroughSocket(tunnel->get(), bytes, start);
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"berth-agent vs ssh/scp/direct TCP on loopback"};
  app.add_option("--agent", c.agent, "agent endpoint")->required();
  app.add_option("--token-file", c.token_file, "file with the agent token")->required();
  app.add_option("--ssh-port", c.ssh_port, "sshd port on 127.0.0.1")->required();
  app.add_option("--ssh-key", c.ssh_key, "private key for root@127.0.0.1")->required();
  app.add_option("--work-dir", c.work_dir, "scratch directory on disk")->required();
  app.add_option("--shm-dir", c.shm_dir, "scratch directory on tmpfs")->required();
  app.add_option("--exec-iterations", c.exec_iterations);
  app.add_option("--ssh-iterations", c.ssh_iterations);
  app.add_option("--upload-mib", c.upload_mib);
  app.add_option("--tunnel-mib", c.tunnel_mib);
  app.add_option("--repeats", c.repeats, "throughput runs per figure (best is kept)");
  app.add_option("--out", c.out, "write the markdown report here");
  app.add_option("--sections", c.sections, "which parts to run: exec,upload,tunnel");
  app.add_option("--agent-pid", c.agent_pid, "the agent's pid (its CPU time counts for tunnels)");
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);

  auto endpoint = Endpoint::Parse(c.agent);
  if (!endpoint) {
    std::cerr << endpoint.error().message << "\n";
    return 2;
  }
  std::string token;
  std::getline(std::ifstream(c.token_file), token);
  client::ApiClient client(*endpoint, token);
  Report r;
  int failures = 0;
  // Each part runs on its own: one failing (an endpoint missing or broken) does not hide the
  // figures of the others.
  auto section = [&](const std::string& name, const std::function<void()>& body) {
    if (c.sections.find(name) == std::string::npos) return;
    try {
      body();
    } catch (const std::exception& e) {
      ++failures;
      r.Line(fmt::format("**{}: FAILED: {}**", name, e.what()));
      r.Line("");
    }
  };
  section("exec", [&] {
    // ---- exec --------------------------------------------------------------------------
    nlohmann::json exec_body = {{"cmd", {"true"}}};
    auto agent_exec = Measure(5, c.exec_iterations, [&] {
      auto res = client.Json(verb::post, "/v1/exec", exec_body);
      return res && (*res)["exit_code"] == 0;
    });
    std::string header_file = c.work_dir + "/curl-headers";
    std::ofstream(header_file) << "Authorization: Bearer " << token
                               << "\nContent-Type: application/json\n";
    std::string url = fmt::format("http://{}:{}/v1/exec", endpoint->host, endpoint->port);
    auto curl_exec = Measure(3, c.exec_iterations, [&] {
      return Run({"curl", "-sf", "-o", "/dev/null", "-H", "@" + header_file, "-d",
                  R"({"cmd":["true"]})", url}) == 0;
    });
    auto ssh_new = Measure(2, c.ssh_iterations, [&] {
      return Run(Plus(SshBase(c), {"root@127.0.0.1", "true"})) == 0;
    });
    std::string control = c.work_dir + "/ssh-control";
    pid_t master = Spawn(Plus(SshBase(c), {"-M", "-S", control, "-N", "root@127.0.0.1"}));
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!std::filesystem::exists(control) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto ssh_mux = Measure(3, c.exec_iterations, [&] {
      return Run(Plus(SshBase(c), {"-S", control, "-o", "ControlMaster=no", "root@127.0.0.1",
                                   "true"})) == 0;
    });
    kill(master, SIGTERM);
    Wait(master);
    r.Line("## exec round trip of `true` (new connection per call; ms)");
    r.Line("");
    r.Line("| path | p50 | p95 |");
    r.Line("|---|---|---|");
    r.Line(fmt::format("| agent, client library (ApiClient, new TCP connection) | {:.2f} | {:.2f} |",
                       agent_exec.p50, agent_exec.p95));
    r.Line(fmt::format("| agent, curl (new process + connection) | {:.2f} | {:.2f} |",
                       curl_exec.p50, curl_exec.p95));
    r.Line(fmt::format("| ssh, new connection | {:.2f} | {:.2f} |", ssh_new.p50, ssh_new.p95));
    r.Line(fmt::format("| ssh, multiplexed (ControlMaster up) | {:.2f} | {:.2f} |", ssh_mux.p50,
                       ssh_mux.p95));

    r.Line("");
    double vs_new = agent_exec.p50 / ssh_new.p50;
    double vs_mux = agent_exec.p50 / ssh_mux.p50;
    r.Line(fmt::format("- agent (library) / ssh new connection, p50: {:.3f}x (bar <= 0.2x): {}",
                       vs_new, Verdict(vs_new <= 0.2)));
    r.Line(fmt::format("- agent (library) / ssh multiplexed, p50: {:.3f}x (bar <= 1x): {}", vs_mux,
                       Verdict(vs_mux <= 1.0)));
    r.Line(fmt::format("- agent (curl) / ssh multiplexed, p50: {:.3f}x (process start on both sides)",
                       curl_exec.p50 / ssh_mux.p50));
    r.Line("");
  });

  section("upload", [&] {
    // ---- upload -----------------------------------------------------------------------
    std::string source = c.shm_dir + "/upload-source";
    struct RemoveSource {
      std::string path;
      ~RemoveSource() { std::filesystem::remove(path); }
    } remove_source{source};
    {
      std::ifstream random("/dev/urandom", std::ios::binary);
      std::ofstream out(source, std::ios::binary);
      std::vector<char> buf(1 << 20);
      for (int i = 0; i < c.upload_mib; ++i) {
        random.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      }
    }
    r.Line(fmt::format("## upload of {} MiB from tmpfs (MB/s, best of {})", c.upload_mib,
                       c.repeats));
    r.Line("");
    r.Line("| destination | agent PUT /v1/files (client library) | scp | ratio |");
    r.Line("|---|---|---|---|");
    std::vector<std::pair<std::string, double>> upload_ratios;
    for (const auto& [label, dir] :
         std::vector<std::pair<std::string, std::string>>{{"disk", c.work_dir},
                                                          {"tmpfs", c.shm_dir}}) {
      double agent_mbs = Best(c.repeats, [&] { return UploadWithAgent(client, source, dir + "/agent.bin"); });
      double scp_mbs = Best(c.repeats, [&] { return UploadWithScp(c, source, dir + "/scp.bin"); });
      r.Line(fmt::format("| {} | {:.0f} | {:.0f} | {:.2f}x |", label, agent_mbs, scp_mbs,
                         agent_mbs / scp_mbs));
      upload_ratios.emplace_back(label, agent_mbs / scp_mbs);
    }
    r.Line("");
    for (const auto& [label, ratio] : upload_ratios) {
      r.Line(fmt::format("- upload to {}: agent / scp {:.2f}x (bar >= 2x): {}", label, ratio,
                         Verdict(ratio >= 2.0)));
    }
    r.Line("");
  });

  section("tunnel", [&] {
    // ---- tunnel -----------------------------------------------------------------------
    SinkServer sink;
    SpliceRelay bare_relay(sink.port());
    uint64_t bytes = static_cast<uint64_t>(c.tunnel_mib) << 20;
    tunnel::PortForwarder::Options raw_options;
    raw_options.mode = tunnel::TunnelMode::kRaw;
    auto raw_forwarder = tunnel::PortForwarder::Start(client, "/v1", sink.port(), raw_options);
    if (!raw_forwarder) {
      throw std::runtime_error("port forwarder: " + raw_forwarder.error().message);
    }
    tunnel::PortForwarder::Options ws_options;
    ws_options.mode = tunnel::TunnelMode::kWebSocket;
    auto ws_forwarder = tunnel::PortForwarder::Start(client, "/v1", sink.port(), ws_options);
    if (!ws_forwarder) throw std::runtime_error("port forwarder: " + ws_forwarder.error().message);
    uint16_t ssh_local = FreePort();
    pid_t ssh_fwd = Spawn(Plus(SshBase(c), {"-N", "-o", "ExitOnForwardFailure=yes", "-L",
                                            fmt::format("{}:127.0.0.1:{}", ssh_local, sink.port()),
                                            "root@127.0.0.1"}));
    bool ssh_up = WaitForPort(ssh_local, std::chrono::seconds(10));
    // Per path: the throughput of each round, and the least CPU (all processes of the path)
    // per GiB.
    struct Path {
      std::vector<double> mbs;
      double cpu = -1;
      double Best() const { return mbs.empty() ? -1 : *std::max_element(mbs.begin(), mbs.end()); }
    };
    Path direct, bare, raw_library, raw_forwarded, ws_forwarded, via_ssh;
    double gib = static_cast<double>(bytes) / (1u << 30);
    auto run = [&](Path& path, const std::function<double()>& send, bool count_cpu = true) {
      double before = CpuSeconds(c.agent_pid);
      double mbs = send();
      double cpu = (CpuSeconds(c.agent_pid) - before) / gib;
      if (mbs < 0) throw std::runtime_error("throughput run failed");
      path.mbs.push_back(mbs);
      if (count_cpu) path.cpu = path.cpu < 0 ? cpu : std::min(path.cpu, cpu);
    };
    for (int i = 0; i < c.repeats; ++i) {
      run(direct, [&] { return SendToSink(sink.port(), bytes); });
      run(bare, [&] { return SendToSink(bare_relay.port(), bytes); });
      run(raw_library, [&] { return SendThroughRawTunnel(client, sink.port(), bytes); });
      run(raw_forwarded, [&] { return SendToSink((*raw_forwarder)->local_port(), bytes); });
      run(ws_forwarded, [&] { return SendToSink((*ws_forwarder)->local_port(), bytes); });
      // ssh and sshd are other processes: their CPU is not counted.
      if (ssh_up) run(via_ssh, [&] { return SendToSink(ssh_local, bytes); }, false);
    }
    (*raw_forwarder)->Stop();
    (*ws_forwarder)->Stop();
    kill(ssh_fwd, SIGTERM);
    Wait(ssh_fwd);
    // Each round's ratio compares runs made seconds apart, under about the same load.
    auto median_ratio = [&](const Path& path) {
      std::vector<double> ratios;
      for (size_t i = 0; i < path.mbs.size() && i < direct.mbs.size(); ++i) {
        ratios.push_back(path.mbs[i] / direct.mbs[i]);
      }
      return ratios.empty() ? -1.0 : Percentile(ratios, 50);
    };
    r.Line(fmt::format("## tunnel throughput, {} MiB into a byte-counting sink ({} rounds)",
                       c.tunnel_mib, c.repeats));
    r.Line("");
    r.Line("The paths take turns in each round. MB/s: the best round. / direct: the median over "
           "rounds of the path's MB/s over the direct MB/s of the same round.");
    r.Line(fmt::format("CPU: user + system seconds per GiB of the sender, the sink, the forwarder "
                       "and the agent together, least of the rounds{}.",
                       c.agent_pid > 0 ? "" : " (the agent not counted: no --agent-pid)"));
    r.Line("");
    r.Line("| path | relays | MB/s (best) | / direct (median) | CPU s/GiB "
           "| direct CPU / path CPU |");
    r.Line("|---|---|---|---|---|---|");
    auto row = [&](const std::string& name, int relays, const Path& path) {
      std::string cpu = path.cpu < 0 ? "–" : fmt::format("{:.2f}", path.cpu);
      std::string cpu_ratio = path.cpu <= 0 ? "–" : fmt::format("{:.2f}x", direct.cpu / path.cpu);
      r.Line(fmt::format("| {} | {} | {:.0f} | {:.2f}x | {} | {} |", name, relays, path.Best(),
                         median_ratio(path), cpu, cpu_ratio));
    };
    row("direct TCP to the sink", 0, direct);
    row("bare splice relay → sink (the floor of any relay)", 1, bare);
    row("agent, raw: OpenRawTunnel socket → /v1/tunnel → sink", 1, raw_library);
    row("agent, raw: PortForwarder → /v1/tunnel → sink", 2, raw_forwarded);
    row("agent, WebSocket: PortForwarder → /v1/tunnel → sink", 2, ws_forwarded);
    row("ssh -L → sink", 2, via_ssh);
    r.Line("");
    double lib = median_ratio(raw_library);
    double floor = median_ratio(bare);
    double fwd = median_ratio(raw_forwarded);
    r.Line(fmt::format("- agent raw tunnel (library socket) / direct: {:.2f}x (bar >= 0.9x): {}",
                       lib, Verdict(lib >= 0.9)));
    r.Line(fmt::format("- bare splice relay / direct: {:.2f}x: what one relay costs here at the "
                       "least", floor));
    r.Line(fmt::format("- agent raw tunnel (library socket) / bare splice relay: {:.2f}x",
                       floor > 0 ? lib / floor : -1.0));
    r.Line(fmt::format("- agent raw tunnel (PortForwarder) / direct: {:.2f}x (bar >= 0.9x): {}",
                       fwd, Verdict(fwd >= 0.9)));
    r.Line(fmt::format("- agent WebSocket tunnel (PortForwarder) / direct: {:.2f}x",
                       median_ratio(ws_forwarded)));
    r.Line(fmt::format("- agent raw (PortForwarder) / WebSocket (PortForwarder), best: {:.2f}x",
                       raw_forwarded.Best() / ws_forwarded.Best()));
    if (!via_ssh.mbs.empty()) {
      r.Line(fmt::format("- agent raw (PortForwarder) / ssh -L, best: {:.2f}x",
                         raw_forwarded.Best() / via_ssh.Best()));
    }
  });
  if (!c.out.empty()) std::ofstream(c.out) << r.text;
  return failures == 0 ? 0 : 1;
}
