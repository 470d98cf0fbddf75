#include "cli/progress.h"

#include <algorithm>
#include <ostream>

#include <fmt/format.h>

#include "cli/output.h"

namespace berth::cli {

std::string RenderProgress(const std::string& label, uint64_t done,
                           std::optional<uint64_t> total, double seconds, size_t width) {
  std::string rate;
  if (seconds > 0.05) {
    rate = FormatBytes(static_cast<uint64_t>(static_cast<double>(done) / seconds)) + "/s";
  }
  if (!total || *total == 0) {
    return fmt::format("{}  {}  {}", label, FormatBytes(done), rate);
  }
  uint64_t shown = std::min(done, *total);  // a tar stream may run past the files' size
  double fraction = static_cast<double>(shown) / static_cast<double>(*total);
  // Fixed widths, so that the bar does not change size as the numbers grow.
  std::string numbers = fmt::format("{:3d}%  {:>10} / {:>10}  {:>12}",
                                    static_cast<int>(fraction * 100), FormatBytes(shown),
                                    FormatBytes(*total), rate);
  size_t used = label.size() + numbers.size() + 8;
  size_t bar = width > used + 10 ? std::min<size_t>(width - used, 40) : 10;
  size_t filled = static_cast<size_t>(fraction * static_cast<double>(bar));
  return fmt::format("{}  [{}{}]  {}", label, std::string(filled, '#'),
                     std::string(bar - filled, '.'), numbers);
}

ProgressBar::ProgressBar(std::ostream& err, bool enabled, std::string label, size_t width)
    : err_(err), enabled_(enabled), label_(std::move(label)), width_(width) {}

void ProgressBar::Update(uint64_t done, std::optional<uint64_t> total) {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  auto now = std::chrono::steady_clock::now();
  if (now - start_ < kDelay || now - last_draw_ < kRedraw) return;
  last_draw_ = now;
  double seconds = std::chrono::duration<double>(now - start_).count();
  std::string line = RenderProgress(label_, done, total, seconds, width_);
  if (line.size() + 1 > width_) line.resize(width_ > 1 ? width_ - 1 : 0);
  // \r and erase-line: each draw replaces the last.
  err_ << "\r\x1b[2K" << line << std::flush;
  drawn_ = true;
}

void ProgressBar::Finish() {
  std::lock_guard lock(mutex_);
  if (!drawn_) return;
  err_ << "\r\x1b[2K" << std::flush;
  drawn_ = false;
}

}  // namespace berth::cli
