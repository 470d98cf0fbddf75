// berthd's own share of the work (issue 10, "Benchmark"), against a berthd that
// bench/run-berthd-core-bench started with the unix transport: every workspace's agent is a
// real berth-agent host process on a unix socket and libvirt is its test driver, so no guest
// CPU (TCG) hides what berthd itself costs. The same load client (bench/http_load.h:
// keep-alive connections, closed loop) drives berthd and, as the baseline, the agents directly.
//
// Measured, in this order:
//  - berthd's threads and RSS right after start, with no workspace;
//  - while --workspaces workspaces are created (and until each is running), then idle;
//  - exec `true` on one keep-alive connection, through berthd and straight to the first
//    workspace's agent (its unix socket and token), in --rounds alternating rounds:
//    p50/p99 and the difference (target: berthd adds <= 1 ms at p50);
//  - --get-connections concurrent `GET /v1/workspaces/{ws}` (connection i asks for workspace
//    i mod N) against as many concurrent `GET /v1/health` (no key, no store: berthd's HTTP
//    floor): requests/s, p50/p99;
//  - --exec-connections concurrent exec `true` across --exec-workspaces workspaces, through
//    berthd and straight to the same agents: execs/s, p50/p99;
//  - threads and RSS idle again afterwards, and while every workspace is deleted.
// berthd's CPU time per request (from /proc) is printed beside each load: it depends less on
// what else runs on the machine than the rates do.
#include <signal.h>

#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "bench/bench_util.h"
#include "bench/http_load.h"
#include "bench/process_sampler.h"
#include "common/client/api_client.h"

namespace {

using namespace berth;
using namespace berth::bench;
using http::bhttp::verb;
namespace fs = std::filesystem;

struct Config {
  std::string url;  // http://127.0.0.1:PORT
  std::string key_file;
  std::string data_dir;
  pid_t berthd_pid = 0;
  int workspaces = 20;
  int exec_workspaces = 10;
  int get_connections = 200;
  int exec_connections = 50;
  int rounds = 10;
  int round_execs = 200;
  int warmup_seconds = 2;
  int get_seconds = 20;
  int health_seconds = 10;
  int exec_seconds = 20;
  int direct_exec_seconds = 15;
  int idle_seconds = 5;
  int threads = 2;
  std::string out;
};

// The markdown report; printed as it grows unless it goes to a file (the script prints that).
struct Report {
  bool echo = true;
  std::string text;
  void Line(const std::string& s = "") {
    if (echo) std::cout << s << std::endl;
    text += s + "\n";
  }
};

std::string ReadLine(const fs::path& path) {
  std::string line;
  std::ifstream in(path);
  std::getline(in, line);
  if (line.empty()) throw std::runtime_error("nothing in " + path.string());
  return line;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

void Check(const Result<nlohmann::json>& r, const std::string& what) {
  if (!r) throw std::runtime_error(what + ": " + r.error().message);
}

// A load's figures, and whether it had errors (which make the run fail, after the report).
struct Load {
  LoadResult result;
  double berthd_cpu_s = 0;
  double P(double p) const { return Percentile(result.latencies_ms, p); }
  // berthd CPU per answered request (warm-up included, as the CPU time is), microseconds.
  double CpuPerRequestUs() const {
    return result.completed ? berthd_cpu_s * 1e6 / static_cast<double>(result.completed) : 0;
  }
};

class Bench {
 public:
  explicit Bench(Config c) : c_(std::move(c)), sampler_(c_.berthd_pid, std::chrono::milliseconds(25)) {
    std::string host_port = c_.url.substr(c_.url.find("//") + 2);
    auto endpoint = Endpoint::Parse("tcp:" + host_port);
    if (!endpoint) throw std::runtime_error("--url: " + endpoint.error().message);
    berthd_ = *endpoint;
    host_ = host_port;
    key_ = ReadLine(c_.key_file);
  }

  int Run() {
    signal(SIGPIPE, SIG_IGN);
    client::ApiClient api(berthd_, key_);

    Idle("just started, 0 workspaces");

    Begin(fmt::format("creating {} workspaces (until each runs)", c_.workspaces));
    for (int i = 0; i < c_.workspaces; ++i) {
      nlohmann::json body = {{"name", fmt::format("bench-{:02}", i)}};
      auto ws = api.Json(verb::post, "/v1/workspaces", body);
      Check(ws, "create");
      ids_.push_back((*ws)["id"].get<std::string>());
    }
    for (const auto& id : ids_) {
      nlohmann::json body = {{"state", "running"}, {"timeout_s", 120}};
      Check(api.Json(verb::post, fmt::format("/v1/workspaces/{}/wait", id), body), "wait " + id);
    }
    phases_.push_back(sampler_.End());

    Idle(fmt::format("{} running, idle", c_.workspaces));
    idle_threads_ = phases_.back().threads_last;
    ExecSequential();
    GetConcurrent();
    ExecConcurrent();
    Idle(fmt::format("{} running, idle after the loads", c_.workspaces));

    Begin(fmt::format("deleting {} workspaces (until each is gone)", c_.workspaces));
    for (const auto& id : ids_) Check(api.Json(verb::delete_, "/v1/workspaces/" + id), "delete");
    auto deadline = Clock::now() + std::chrono::seconds(120);
    for (const auto& id : ids_) {
      for (;;) {
        auto r = api.Request(verb::get, "/v1/workspaces/" + id);
        if (r && r->status == 404) break;
        if (Clock::now() > deadline) throw std::runtime_error(id + " was not deleted in 120 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    phases_.push_back(sampler_.End());

    Write();
    return errors_ == 0 ? 0 : 1;
  }

 private:
  // Threads and memory of an idle berthd, over --idle-seconds (long enough for an idle tick).
  void Idle(const std::string& name) {
    Begin(name);
    std::this_thread::sleep_for(std::chrono::seconds(c_.idle_seconds));
    phases_.push_back(sampler_.End());
  }

  // A phase of the thread and memory table; its name goes to stderr as progress.
  void Begin(const std::string& name) {
    Progress(name);
    sampler_.Begin(name);
  }
  static void Progress(const std::string& what) {
    auto now = std::time(nullptr);
    std::cerr << fmt::format("[{:%H:%M:%S}] {}", fmt::localtime(now), what) << std::endl;
  }

  fs::path WorkspaceDir(const std::string& id) const { return fs::path(c_.data_dir) / "workspaces" / id; }

  LoadRequest ExecThroughBerthd(const std::string& id) const {
    return {berthd_, FormatRequest(verb::post, fmt::format("/v1/workspaces/{}/exec", id), host_,
                                   key_, kExecBody)};
  }
  LoadRequest ExecDirect(const std::string& id) const {
    Endpoint agent;
    agent.kind = Endpoint::Kind::kUnix;
    agent.path = (WorkspaceDir(id) / "agent.sock").string();
    std::string token = ReadLine(WorkspaceDir(id) / "token");
    return {agent, FormatRequest(verb::post, "/v1/exec", "berth", token, kExecBody)};
  }

  Load Measure(const std::vector<LoadRequest>& connections, const LoadOptions& options,
               const AnswerCheck& check, const std::string& what) {
    if (connections.size() > 1) Progress(fmt::format("{} ({} connections)", what, connections.size()));
    double cpu_before = ProcessCpuSeconds(c_.berthd_pid);
    Load load{RunLoad(connections, options, check), 0};
    load.berthd_cpu_s = ProcessCpuSeconds(c_.berthd_pid) - cpu_before;
    if (load.result.errors > 0) {
      errors_ += load.result.errors;
      error_lines_.push_back(fmt::format("**ERRORS** {}: {} errors, the first: {}", what,
                                         load.result.errors, load.result.first_error));
    }
    // Complete exchanges whose content came back wrong from the agent: berthd relayed them
    // faithfully, so they are the agent's to fix and do not fail the run; they are not timed.
    if (load.result.wrong > 0) {
      error_lines_.push_back(fmt::format("wrong answers {}: {} of {}, the first: `{}`", what,
                                         load.result.wrong, load.result.wrong + load.result.completed,
                                         Trimmed(load.result.first_wrong)));
    }
    return load;
  }

  LoadOptions Timed(int seconds) const {
    LoadOptions o;
    o.threads = c_.threads;
    o.warmup = std::chrono::seconds(c_.warmup_seconds);
    o.duration = std::chrono::seconds(seconds);
    return o;
  }

  void ExecSequential() {
    Begin("exec `true` one after another, 1 connection");
    LoadOptions o;
    o.threads = 1;
    o.warmup_requests = 5;
    o.requests = c_.round_execs;
    // Alternating rounds, each path first in every other one, so load that comes and goes on
    // this shared machine hits both paths alike.
    for (int round = 0; round < c_.rounds; ++round) {
      double p50[2] = {0, 0};  // direct, through berthd
      for (int leg = 0; leg < 2; ++leg) {
        bool direct = (round + leg) % 2 == 0;
        auto load = direct ? Measure({ExecDirect(ids_[0])}, o, ExpectExitZero, "exec, agent direct")
                           : Measure({ExecThroughBerthd(ids_[0])}, o, ExpectExitZero, "exec, through berthd");
        Load& into = direct ? seq_direct_ : seq_berthd_;
        auto& l = into.result.latencies_ms;
        l.insert(l.end(), load.result.latencies_ms.begin(), load.result.latencies_ms.end());
        into.result.completed += load.result.completed;
        into.berthd_cpu_s += load.berthd_cpu_s;
        p50[direct ? 0 : 1] = load.P(50);
      }
      round_p50_deltas_.push_back(p50[1] - p50[0]);
    }
    phases_.push_back(sampler_.End());
  }

  void GetConcurrent() {
    std::vector<LoadRequest> health(c_.get_connections,
                                    {berthd_, FormatRequest(verb::get, "/v1/health", host_, "")});
    health_ = Measure(health, Timed(c_.health_seconds), ExpectOk, "GET /v1/health");
    std::vector<LoadRequest> gets;
    for (int i = 0; i < c_.get_connections; ++i) {
      gets.push_back({berthd_, FormatRequest(verb::get, "/v1/workspaces/" + ids_[i % ids_.size()],
                                             host_, key_)});
    }
    Begin(fmt::format("{} concurrent GET /v1/workspaces/{{ws}}", c_.get_connections));
    get_ = Measure(gets, Timed(c_.get_seconds), ExpectOk, "GET /v1/workspaces/{ws}");
    phases_.push_back(sampler_.End());
  }

  void ExecConcurrent() {
    int spread = std::min<int>(c_.exec_workspaces, static_cast<int>(ids_.size()));
    std::vector<LoadRequest> direct, through;
    for (int i = 0; i < c_.exec_connections; ++i) {
      direct.push_back(ExecDirect(ids_[i % spread]));
      through.push_back(ExecThroughBerthd(ids_[i % spread]));
    }
    par_direct_ = Measure(direct, Timed(c_.direct_exec_seconds), ExpectExitZero, fmt::format("exec x{}, agents direct", c_.exec_connections));
    Begin(fmt::format("{} concurrent exec `true` over {} workspaces", c_.exec_connections,
                               spread));
    par_berthd_ = Measure(through, Timed(c_.exec_seconds), ExpectExitZero, fmt::format("exec x{}, through berthd", c_.exec_connections));
    phases_.push_back(sampler_.End());
  }

  void Write() {
    Report r;
    r.echo = c_.out.empty();
    int spread = std::min<int>(c_.exec_workspaces, static_cast<int>(ids_.size()));
    r.Line("| measure | through berthd | against | ratio |");
    r.Line("|---|---|---|---|");
    double d50 = seq_berthd_.P(50) - seq_direct_.P(50);
    r.Line(fmt::format("| exec `true` p50, 1 keep-alive connection, {}x{} each | {:.2f} ms | "
                       "{:.2f} ms agent direct | {:+.2f} ms ({}: target <= +1 ms) |",
                       c_.rounds, c_.round_execs, seq_berthd_.P(50), seq_direct_.P(50), d50,
                       d50 <= 1.0 ? "meets" : "MISSES"));
    r.Line(fmt::format("| … p50 difference, median over the {} rounds (each pairs runs made "
                       "seconds apart) | | | {:+.2f} ms |",
                       c_.rounds, Percentile(round_p50_deltas_, 50)));
    r.Line(fmt::format("| exec `true` p99, same runs | {:.2f} ms | {:.2f} ms agent direct | "
                       "{:+.2f} ms |",
                       seq_berthd_.P(99), seq_direct_.P(99), seq_berthd_.P(99) - seq_direct_.P(99)));
    r.Line(fmt::format("| berthd CPU per exec, same runs | {:.0f} µs | | |",
                       seq_berthd_.CpuPerRequestUs()));
    r.Line(fmt::format("| {} concurrent GET /v1/workspaces/{{ws}}: throughput | {:.0f} req/s | "
                       "{:.0f} req/s GET /v1/health | {:.2f}x |",
                       c_.get_connections, get_.result.Throughput(), health_.result.Throughput(),
                       get_.result.Throughput() / health_.result.Throughput()));
    r.Line(fmt::format("| … p50 / p99 | {:.1f} / {:.1f} ms | {:.1f} / {:.1f} ms | |", get_.P(50),
                       get_.P(99), health_.P(50), health_.P(99)));
    r.Line(fmt::format("| … berthd CPU per request | {:.0f} µs | {:.0f} µs | |",
                       get_.CpuPerRequestUs(), health_.CpuPerRequestUs()));
    r.Line(fmt::format("| {} concurrent exec `true` over {} workspaces: throughput | {:.0f} exec/s "
                       "| {:.0f} exec/s agents direct | {:.2f}x |",
                       c_.exec_connections, spread, par_berthd_.result.Throughput(),
                       par_direct_.result.Throughput(),
                       par_berthd_.result.Throughput() / par_direct_.result.Throughput()));
    r.Line(fmt::format("| … p50 / p99 | {:.1f} / {:.1f} ms | {:.1f} / {:.1f} ms | |",
                       par_berthd_.P(50), par_berthd_.P(99), par_direct_.P(50), par_direct_.P(99)));
    r.Line(fmt::format("| … berthd CPU per exec | {:.0f} µs | | |", par_berthd_.CpuPerRequestUs()));
    r.Line();
    r.Line("berthd's threads and resident memory (sampled every 25 ms from /proc/PID/status):");
    r.Line();
    r.Line("| phase | seconds | threads (first → last) | threads (min–max) | RSS MiB (last / max) "
           "| berthd CPU s |");
    r.Line("|---|---|---|---|---|---|");
    for (const auto& p : phases_) {
      r.Line(fmt::format("| {} | {:.1f} | {} → {} | {}–{} | {:.1f} / {:.1f} | {:.2f} |", p.name,
                         p.seconds, p.threads_first, p.threads_last, p.threads_min, p.threads_max,
                         static_cast<double>(p.rss_kib_last) / 1024,
                         static_cast<double>(p.rss_kib_max) / 1024, p.cpu_seconds));
    }
    r.Line();
    int start_threads = phases_.front().threads_last;
    int peak = 0;
    for (const auto& p : phases_) peak = std::max(peak, p.threads_max);
    r.Line(fmt::format("- threads: {} with 0 workspaces, {} with {} idle, {} at the peak "
                       "(target: no growth with workspaces or operations): {}",
                       start_threads, idle_threads_, c_.workspaces, peak,
                       peak <= start_threads ? "meets" : "MISSES"));
    if (error_lines_.empty()) {
      r.Line("- errors and wrong answers: none");
    } else {
      for (const auto& e : error_lines_) r.Line("- " + e);
    }
    if (!c_.out.empty()) std::ofstream(c_.out) << r.text;
  }

  static constexpr const char* kExecBody = R"({"cmd":["true"]})";

  Config c_;
  ProcessSampler sampler_;
  Endpoint berthd_;
  std::string host_;
  std::string key_;
  std::vector<std::string> ids_;
  std::vector<PhaseFigures> phases_;
  std::vector<double> round_p50_deltas_;  // through berthd minus direct, per round (ms)
  Load seq_direct_, seq_berthd_, health_, get_, par_direct_, par_berthd_;
  int idle_threads_ = 0;
  uint64_t errors_ = 0;
  std::vector<std::string> error_lines_;
};

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"berthd core benchmark (issue 10): run by bench/run-berthd-core-bench"};
  app.add_option("--url", c.url, "berthd, http://127.0.0.1:PORT")->required();
  app.add_option("--key-file", c.key_file, "an admin key")->required();
  app.add_option("--data-dir", c.data_dir, "berthd's data directory (agent sockets, tokens)")
      ->required();
  app.add_option("--berthd-pid", c.berthd_pid, "berthd's pid (threads, RSS, CPU)")->required();
  app.add_option("--workspaces", c.workspaces, "workspaces to create");
  app.add_option("--exec-workspaces", c.exec_workspaces, "workspaces the concurrent execs use");
  app.add_option("--get-connections", c.get_connections);
  app.add_option("--exec-connections", c.exec_connections);
  app.add_option("--rounds", c.rounds, "rounds of the one-connection exec comparison");
  app.add_option("--round-execs", c.round_execs, "timed execs per path and round");
  app.add_option("--warmup-seconds", c.warmup_seconds, "untimed start of each concurrent load");
  app.add_option("--get-seconds", c.get_seconds);
  app.add_option("--health-seconds", c.health_seconds);
  app.add_option("--exec-seconds", c.exec_seconds);
  app.add_option("--direct-exec-seconds", c.direct_exec_seconds);
  app.add_option("--idle-seconds", c.idle_seconds);
  app.add_option("--threads", c.threads, "client threads for the concurrent loads");
  app.add_option("--out", c.out, "write the markdown report here");
  CLI11_PARSE(app, argc, argv);
  if (c.workspaces < 3) {
    std::cerr << "--workspaces must be at least 3\n";
    return 2;
  }
  try {
    Bench bench(c);
    return bench.Run();
  } catch (const std::exception& e) {
    std::cerr << "berthd_core_bench: " << e.what() << "\n";
    return 1;
  }
}
