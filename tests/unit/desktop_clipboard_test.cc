// The clipboard's contract with the guest's tool (controller/desktop/clipboard.h): the exec
// requests berthd sends, and what each way the tool can end means for the API.
#include <catch2/catch.hpp>

#include "controller/desktop/clipboard.h"

namespace berth::desktop {
namespace {

protocol::ExecResult Ended(int code, std::string out = "", std::string err = "") {
  protocol::ExecResult r;
  r.exit.exit_code = code;
  r.stdout_data = std::move(out);
  r.stderr_data = std::move(err);
  return r;
}

TEST_CASE("the clipboard's exec requests run the tool with the text on stdin and output bounded just past the limit") {
  auto get = ClipboardGetRequest("/opt/clip");
  CHECK(protocol::CommandArgv(get.cmd) == std::vector<std::string>{"/opt/clip", "get"});
  CHECK_FALSE(get.stdin_data);
  CHECK(get.max_output_bytes == kMaxClipboard + 1);
  REQUIRE(get.timeout_ms);
  CHECK(std::chrono::milliseconds(*get.timeout_ms) < kClipboardDeadline);
  CHECK_FALSE(get.background);
  auto set = ClipboardSetRequest("/opt/clip", "h\xc3\xa9");
  CHECK(protocol::CommandArgv(set.cmd) == std::vector<std::string>{"/opt/clip", "set"});
  CHECK(set.stdin_data == "h\xc3\xa9");
}

TEST_CASE("the tool's output is the clipboard's text: empty is empty, UTF-8 passes, anything else is an error") {
  CHECK(ClipboardTextOf(Ended(0)).value() == "");
  CHECK(ClipboardTextOf(Ended(0, "\xe4\xb8\x96\n")).value() == "\xe4\xb8\x96\n");
  auto binary = ClipboardTextOf(Ended(0, "\xff\xfe"));
  REQUIRE_FALSE(binary);
  CHECK(binary.error().code == ErrorCode::kUnavailable);
  auto cut = Ended(0, std::string(100, 'x'));
  cut.truncated = true;
  CHECK(ClipboardTextOf(cut).error().code == ErrorCode::kTooLarge);
  CHECK(ClipboardTextOf(Ended(0, std::string(kMaxClipboard + 1, 'x'))).error().code == ErrorCode::kTooLarge);
}

TEST_CASE("the tool's failures: missing is not a desktop image, exit 3 is a display not up, others say what the tool said") {
  for (int code : {126, 127}) {
    auto missing = ClipboardTextOf(Ended(code, "", "sh: 1: /usr/local/lib/berth/clipboard: not found"));
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ErrorCode::kFailedPrecondition);
    CHECK(missing.error().message.find("desktop image") != std::string::npos);
  }
  auto down = ClipboardSetOf(Ended(3, "", "clipboard: the X display :0 is not up\n"));
  REQUIRE_FALSE(down);
  CHECK(down.error().code == ErrorCode::kUnavailable);
  CHECK(down.error().message.find("not up yet") != std::string::npos);
  // The tool's last words, bounded to 300 bytes and cut on a character, trailing newline gone.
  std::string long_err;
  for (int i = 0; i < 150; ++i) long_err += "\xe4\xb8\x96";  // the cut falls inside one
  long_err += "end\n";
  auto other = ClipboardTextOf(Ended(1, "", long_err));
  REQUIRE_FALSE(other);
  CHECK(other.error().code == ErrorCode::kUnavailable);
  CHECK(other.error().message.find("exit 1") != std::string::npos);
  CHECK(other.error().message.ends_with("end"));
  CHECK(other.error().message.size() < 400);
  CHECK(protocol::IsValidUtf8(other.error().message));
  auto slow = Ended(137);
  slow.exit.timed_out = true;
  slow.exit.signal = "KILL";
  CHECK(ClipboardSetOf(slow).error().message.find("did not answer in time") != std::string::npos);
  CHECK(ClipboardSetOf(Ended(0)));
}

}  // namespace
}  // namespace berth::desktop
