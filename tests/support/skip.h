// Skipping a Catch2 test case so that CI sees it. Catch2 v2 has no skip: a case that WARNs and
// returns passes, and ctest reports the binary green although part of it never ran.
// BERTH_SKIP(reason) prints `SKIP <ctest name>: <test case>: <reason>` on stderr and, when
// $BERTH_SKIP_LOG names a file (scripts/test sets it), appends that line to it; scripts/test
// then names every skip in its summary and fails on any that tests/expected_skips.txt does not
// allow. The ctest name is the test binary's file name (berth_add_test names them alike).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace berth::testing {

// Records that the current test case skips the rest of itself. Call it on the test's thread,
// inside a TEST_CASE; the caller returns right after (BERTH_SKIP does both).
inline void RecordSkip(std::string_view reason) {
  std::error_code ec;
  std::string binary = std::filesystem::read_symlink("/proc/self/exe", ec).filename().string();
  if (ec) binary = "?";
  std::string line = "SKIP " + binary + ": " + Catch::getResultCapture().getCurrentTestName() +
                     ": " + std::string(reason) + "\n";
  // One write() with O_APPEND: lines of tests that run in parallel do not interleave.
  (void)!::write(STDERR_FILENO, line.data(), line.size());  // best effort: the log below counts
  if (const char* log = std::getenv("BERTH_SKIP_LOG"); log != nullptr && *log != '\0') {
    int fd = ::open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      bool whole = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      ::close(fd);
      // A skip that cannot be recorded must not pass for a run: fail the case instead.
      if (!whole) FAIL("cannot append to $BERTH_SKIP_LOG " << log << " (skip: " << reason << ")");
    } else {
      FAIL("cannot open $BERTH_SKIP_LOG " << log << " (skip: " << reason << ")");
    }
  }
  WARN("skipped: " << reason);
}

}  // namespace berth::testing

// Skips the rest of the current test case, recorded for scripts/test's summary.
#define BERTH_SKIP(reason)                  \
  do {                                      \
    ::berth::testing::RecordSkip(reason);   \
    return;                                 \
  } while (false)
