#include "guest-agent/process_table.h"

#include <signal.h>

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace berth::agent {
namespace {

// Finished processes stay listed this long, so a caller who lost its stream can still read the
// exit status and the tail of the output...
constexpr auto kKeepFinished = std::chrono::minutes(10);
// ...but no more than this many, so a loop of short execs cannot grow the table (each holds up
// to 1 MiB of output).
constexpr size_t kMaxFinished = 200;

}  // namespace

ProcessTable::ProcessTable(boost::asio::io_context& io, ActivityTracker& activity)
    : io_(io), activity_(activity), self_(std::make_shared<ProcessTable*>(this)) {
  // Writing to the stdin pipe of a process that exited must be an error (EPIPE), not the death
  // of the agent. berth-agent's main does the same; tests run the agent in-process.
  signal(SIGPIPE, SIG_IGN);
  activity_.SetRunningProcessCounter([this] { return RunningCount(); });
}

ProcessTable::~ProcessTable() {
  activity_.SetRunningProcessCounter({});
  Shutdown();
  for (auto& p : processes_) p->Dispose();
}

Result<std::shared_ptr<Process>> ProcessTable::Start(const SpawnSpec& spec,
                                                     Process::Options options) {
  Prune();
  if (options.tag) {
    for (const auto& p : processes_) {
      if (p->running() && p->tag() == options.tag) {
        return Fail(ErrorCode::kAlreadyExists,
                    fmt::format("tag {} is taken by running process {}", *options.tag, p->pid()));
      }
    }
  }
  // The fork happens here, on the I/O thread: it takes well under a millisecond per 100 MiB of
  // agent memory, and doing it elsewhere would open a race on the tag check above.
  auto spawned = Spawn(spec);
  if (!spawned) return Fail(spawned.error());
  auto process = Process::Adopt(io_, std::move(*spawned), std::move(options), spec.pty.has_value());
  std::weak_ptr<ProcessTable*> weak = self_;
  process->SetOnExit([weak] {
    if (auto table = weak.lock()) (*table)->Prune();
  });
  processes_.push_back(process);
  return process;
}

std::shared_ptr<Process> ProcessTable::Find(std::string_view pid_or_tag) {
  Prune();
  int pid = 0;
  auto [ptr, ec] = std::from_chars(pid_or_tag.data(), pid_or_tag.data() + pid_or_tag.size(), pid);
  bool by_pid = ec == std::errc() && ptr == pid_or_tag.data() + pid_or_tag.size();
  std::shared_ptr<Process> best;
  for (auto it = processes_.rbegin(); it != processes_.rend(); ++it) {
    const auto& p = *it;
    bool match = by_pid ? p->pid() == pid : (p->tag() && *p->tag() == pid_or_tag);
    if (!match) continue;
    if (p->running()) return p;
    if (!best) best = p;
  }
  return best;
}

std::vector<std::shared_ptr<Process>> ProcessTable::List() {
  Prune();
  return {processes_.begin(), processes_.end()};
}

int ProcessTable::RunningCount() const {
  return static_cast<int>(
      std::count_if(processes_.begin(), processes_.end(), [](const auto& p) { return p->running(); }));
}

void ProcessTable::Shutdown() {
  for (auto& p : processes_) p->Kill();
}

void ProcessTable::Prune() {
  auto cutoff = Process::Clock::now() - kKeepFinished;
  size_t finished = 0;
  for (const auto& p : processes_) finished += p->running() ? 0 : 1;
  for (auto it = processes_.begin(); it != processes_.end();) {
    const auto& p = *it;
    bool done = !p->running() && p->output_done();
    // Oldest first: the excess over kMaxFinished goes first, then whatever is too old.
    if (done && (finished > kMaxFinished || p->ended_at() < cutoff)) {
      p->Dispose();
      it = processes_.erase(it);
      --finished;
    } else {
      ++it;
    }
  }
}

}  // namespace berth::agent
