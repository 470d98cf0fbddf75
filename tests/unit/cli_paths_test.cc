// `berth cp` arguments (WS:/path) and the exit codes scripts rely on.
#include <catch2/catch.hpp>

#include "cli/exit_codes.h"
#include "cli/remote_path.h"

using namespace berth;
using namespace berth::cli;

TEST_CASE("WS:/path is remote, the rest is local") {
  auto a = ParseCpArg("dev:/workspace/src");
  REQUIRE(a);
  CHECK(a->remote());
  CHECK(*a->workspace == "dev");
  CHECK(a->path == "/workspace/src");

  a = ParseCpArg("ws_0123456789abcdef:/");
  REQUIRE(a);
  CHECK(*a->workspace == "ws_0123456789abcdef");
  CHECK(a->path == "/");

  a = ParseCpArg("./dev:/x");  // a slash before the colon: a local name
  REQUIRE(a);
  CHECK_FALSE(a->remote());
  CHECK(a->path == "./dev:/x");

  a = ParseCpArg("/tmp/a:b");
  REQUIRE(a);
  CHECK_FALSE(a->remote());

  a = ParseCpArg("src");
  REQUIRE(a);
  CHECK_FALSE(a->remote());
  CHECK(a->path == "src");

  a = ParseCpArg("-");
  REQUIRE(a);
  CHECK(a->stdio);

  a = ParseCpArg(":/x");  // no workspace: local
  REQUIRE(a);
  CHECK_FALSE(a->remote());

  auto relative = ParseCpArg("dev:src");
  REQUIRE_FALSE(relative);
  CHECK(relative.error().code == ErrorCode::kInvalidArgument);
  CHECK(relative.error().message.find("must be absolute") != std::string::npos);
  CHECK_FALSE(ParseCpArg("dev:"));
  CHECK_FALSE(ParseCpArg(""));
}

TEST_CASE("names and contents") {
  CHECK(BaseName("/a/b") == "b");
  CHECK(BaseName("/a/b/") == "b");
  CHECK(BaseName("b") == "b");
  CHECK(BaseName("/") == "");
  CHECK(JoinPath("/a", "b") == "/a/b");
  CHECK(JoinPath("/a/", "b") == "/a/b");
  CHECK(JoinPath("/", "b") == "/b");
  CHECK(JoinPath("", "b") == "/b");
  CHECK(MeansContents("dir/."));
  CHECK(MeansContents("dir/./"));
  CHECK(MeansContents("."));
  CHECK_FALSE(MeansContents("dir"));
  CHECK_FALSE(MeansContents("dir/.."));
  CHECK_FALSE(MeansContents(".hidden"));
}

TEST_CASE("exit codes") {
  CHECK(ExitCodeFor(ErrorCode::kInvalidArgument) == 2);
  CHECK(ExitCodeFor(ErrorCode::kNotFound) == 3);
  CHECK(ExitCodeFor(ErrorCode::kUnauthenticated) == 4);
  CHECK(ExitCodeFor(ErrorCode::kPermissionDenied) == 4);
  CHECK(ExitCodeFor(ErrorCode::kUnavailable) == 5);
  CHECK(ExitCodeFor(ErrorCode::kAlreadyExists) == 6);
  CHECK(ExitCodeFor(ErrorCode::kFailedPrecondition) == 6);
  CHECK(ExitCodeFor(ErrorCode::kDeadlineExceeded) == 7);
  CHECK(ExitCodeFor(ErrorCode::kInternal) == 1);
  CHECK(ExitCodeFor(ErrorCode::kNoSpace) == 1);

  protocol::ExitStatus status;
  status.exit_code = 3;
  CHECK(ExitCodeFor(status) == 3);
  status.exit_code = 0;
  CHECK(ExitCodeFor(status) == 0);
  protocol::ExitStatus killed;
  killed.signal = "KILL";
  CHECK(ExitCodeFor(killed) == 137);
  killed.signal = "TERM";
  CHECK(ExitCodeFor(killed) == 143);
  // The agent reports 128+N itself as exit_code; that wins.
  killed.exit_code = 143;
  CHECK(ExitCodeFor(killed) == 143);
  CHECK(ExitCodeFor(protocol::ExitStatus{}) == 1);
}
