#include "cli/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>

#include "common/error.h"

namespace berth::cli {

Result<std::unique_ptr<RawTerminal>> RawTerminal::Enter(int fd) {
  termios saved{};
  if (tcgetattr(fd, &saved) != 0) return Fail(ErrnoError(errno, "tcgetattr"));
  termios raw = saved;
  cfmakeraw(&raw);
  // Output post-processing stays as the remote PTY left it: the remote side already turned
  // "\n" into "\r\n".
  if (tcsetattr(fd, TCSADRAIN, &raw) != 0) return Fail(ErrnoError(errno, "tcsetattr"));
  return std::unique_ptr<RawTerminal>(new RawTerminal(fd, saved));
}

void RawTerminal::Restore() {
  if (restored_) return;
  restored_ = true;
  tcsetattr(fd_, TCSADRAIN, &saved_);
}

std::optional<protocol::PtySize> WindowSize(int fd) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 || ws.ws_row == 0) return std::nullopt;
  return protocol::PtySize(ws.ws_col, ws.ws_row);
}

bool Confirm(std::istream& in, std::ostream& err, const std::string& question) {
  err << question << " [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(in, answer)) {
    err << "\n";
    return false;
  }
  return answer == "y" || answer == "Y" || answer == "yes" || answer == "YES" || answer == "Yes";
}

Result<std::string> ReadSecretLine(const std::string& prompt) {
  bool tty = isatty(0) == 1;
  termios saved{};
  if (tty) {
    std::cerr << prompt << std::flush;
    tcgetattr(0, &saved);
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    tcsetattr(0, TCSAFLUSH, &quiet);
  }
  std::string line;
  bool got = static_cast<bool>(std::getline(std::cin, line));
  if (tty) {
    tcsetattr(0, TCSAFLUSH, &saved);
    std::cerr << "\n";
  }
  if (!got) return Fail(ErrorCode::kInvalidArgument, "no API key given on stdin");
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

}  // namespace berth::cli
