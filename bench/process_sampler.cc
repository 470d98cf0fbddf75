#include "bench/process_sampler.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace berth::bench {

std::optional<ProcessReading> ReadProcess(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  if (!in) return std::nullopt;
  ProcessReading r;
  bool threads = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("Threads:")) {
      r.threads = std::stoi(line.substr(8));
      threads = true;
    } else if (line.starts_with("VmRSS:")) {
      r.rss_kib = std::stoll(line.substr(6));
    }
  }
  if (!threads) return std::nullopt;  // a zombie has no Threads line worth reading
  return r;
}

double ProcessCpuSeconds(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  // Fields after the command name (which may hold spaces) start after the last ')'.
  std::istringstream rest(text.substr(paren + 2));
  std::vector<std::string> fields{std::istream_iterator<std::string>(rest), {}};
  if (fields.size() <= 12) return -1;
  return (std::stod(fields[11]) + std::stod(fields[12])) /  // utime, stime
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

ProcessSampler::ProcessSampler(pid_t pid, std::chrono::milliseconds every)
    : pid_(pid), every_(every), thread_([this] { Loop(); }) {}

ProcessSampler::~ProcessSampler() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ProcessSampler::Take() {
  auto r = ReadProcess(pid_);
  if (!open_ || !r) return;
  auto& p = phase_;
  if (p.samples == 0) {
    p.threads_first = p.threads_min = p.threads_max = r->threads;
    p.rss_kib_first = p.rss_kib_max = r->rss_kib;
  }
  ++p.samples;
  p.threads_last = r->threads;
  p.threads_min = std::min(p.threads_min, r->threads);
  p.threads_max = std::max(p.threads_max, r->threads);
  p.rss_kib_last = r->rss_kib;
  p.rss_kib_max = std::max(p.rss_kib_max, r->rss_kib);
}

void ProcessSampler::Begin(std::string name) {
  std::lock_guard lock(mutex_);
  phase_ = PhaseFigures{};
  phase_.name = std::move(name);
  open_ = true;
  began_ = std::chrono::steady_clock::now();
  cpu_at_begin_ = ProcessCpuSeconds(pid_);
  Take();
}

PhaseFigures ProcessSampler::End() {
  std::lock_guard lock(mutex_);
  Take();
  open_ = false;
  phase_.cpu_seconds = ProcessCpuSeconds(pid_) - cpu_at_begin_;
  phase_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
  return phase_;
}

void ProcessSampler::Loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    Take();
    wake_.wait_for(lock, every_, [this] { return stop_; });
  }
}

}  // namespace berth::bench
