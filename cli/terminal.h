// Terminal handling for `berth shell` and prompts: raw mode that is always undone, the window
// size, yes/no questions and secrets typed without echo.
#pragma once

#include <termios.h>

#include <iosfwd>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/protocol/exec.h"

namespace berth::cli {

// Puts a terminal in raw mode (no echo, no line editing, no signals from keys: every byte goes
// to the remote PTY) and restores the saved settings on destruction or Restore().
class RawTerminal {
 public:
  // Fails when `fd` is not a terminal.
  static Result<std::unique_ptr<RawTerminal>> Enter(int fd);
  ~RawTerminal() { Restore(); }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  void Restore();

 private:
  RawTerminal(int fd, const termios& saved) : fd_(fd), saved_(saved) {}
  int fd_;
  termios saved_;
  bool restored_ = false;
};

// The window size of the terminal on `fd`; nullopt when it is not one.
std::optional<protocol::PtySize> WindowSize(int fd);

// Asks `question [y/N] ` on `err` and reads an answer from `in`; true for y/yes.
bool Confirm(std::istream& in, std::ostream& err, const std::string& question);

// Reads one line from stdin, without echo when stdin is a terminal (after `prompt` on stderr).
Result<std::string> ReadSecretLine(const std::string& prompt);

}  // namespace berth::cli
