// What a process costs while a benchmark runs: its thread count and resident memory, sampled
// on a thread of the sampler's own from /proc/PID/status, and its CPU time from
// /proc/PID/stat, attributed to named phases.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace berth::bench {

// One reading of /proc/PID/status; nullopt once the process is gone.
struct ProcessReading {
  int threads = 0;
  int64_t rss_kib = 0;
};
std::optional<ProcessReading> ReadProcess(pid_t pid);
// User + system CPU seconds the process has used so far (all its threads); -1 when gone.
double ProcessCpuSeconds(pid_t pid);

// Figures of one phase: from Begin() to End().
struct PhaseFigures {
  std::string name;
  int samples = 0;
  int threads_first = 0, threads_last = 0, threads_min = 0, threads_max = 0;
  int64_t rss_kib_first = 0, rss_kib_last = 0, rss_kib_max = 0;
  double cpu_seconds = 0;
  double seconds = 0;  // wall clock
};

class ProcessSampler {
 public:
  // Starts sampling `pid` every `every`. Samples outside a phase are dropped.
  ProcessSampler(pid_t pid, std::chrono::milliseconds every);
  ~ProcessSampler();
  ProcessSampler(const ProcessSampler&) = delete;
  ProcessSampler& operator=(const ProcessSampler&) = delete;

  // Starts phase `name` (ending any phase still open, whose figures are lost) with a sample
  // taken now. From the benchmark's thread.
  void Begin(std::string name);
  // Ends the current phase with a sample taken now and returns its figures. From the
  // benchmark's thread.
  PhaseFigures End();

 private:
  void Take();  // one sample into the open phase; caller holds mutex_
  void Loop();

  pid_t pid_;
  std::chrono::milliseconds every_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool open_ = false;
  PhaseFigures phase_;
  double cpu_at_begin_ = 0;
  std::chrono::steady_clock::time_point began_;
  std::thread thread_;
};

}  // namespace berth::bench
