// A progress bar on stderr for `berth cp`, drawn only when stderr is a terminal and only for
// transfers that last long enough to need one.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <mutex>
#include <optional>
#include <string>

#include "common/client/files.h"

namespace berth::cli {

// One line: "label  [#####.....]  45%  12.3 MiB / 27.0 MiB  5.1 MiB/s", or without the bar and
// percentage when the total is unknown. `width` is the terminal's width.
std::string RenderProgress(const std::string& label, uint64_t done,
                           std::optional<uint64_t> total, double seconds, size_t width);

class ProgressBar {
 public:
  // Nothing is drawn unless `enabled`; then nothing before kDelay has passed.
  ProgressBar(std::ostream& err, bool enabled, std::string label, size_t width = 80);
  ~ProgressBar() { Finish(); }
  // Thread-safe; redraws at most kRedraw apart.
  void Update(uint64_t done, std::optional<uint64_t> total);
  // Clears the line if anything was drawn.
  void Finish();
  // Calls Update; for the files client.
  client::ProgressFn Callback() {
    return [this](uint64_t done, std::optional<uint64_t> total) { Update(done, total); };
  }

  // Short transfers finish before anybody needs a bar.
  static constexpr std::chrono::milliseconds kDelay{500};
  static constexpr std::chrono::milliseconds kRedraw{100};

 private:
  std::ostream& err_;
  bool enabled_;
  std::string label_;
  size_t width_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;
};

}  // namespace berth::cli
