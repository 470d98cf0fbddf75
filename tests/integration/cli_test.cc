// The real `berth` binary against a real berthd, started with --transport unix (a real
// berth-agent per workspace as a host process, no VM), so that exec, files and sessions run end
// to end in seconds. `berth shell` runs in a pseudo-terminal.
//
// berthd comes from the build (BERTHD_BIN) or from $BERTHD_BIN; the [berthd] cases skip
// (BERTH_SKIP, which scripts/test reports) when neither exists.
#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "tests/integration/cli_test_util.h"
#include "tests/support/skip.h"

using namespace berth::cli_test;

TEST_CASE("berth without a reachable berthd", "[cli]") {
  TempDir dir("berth-cli");
  // Port 1 on loopback: nothing listens, the connection is refused at once.
  Cli cli(dir, "http://127.0.0.1:1", "some-key");
  auto r = cli({"ls"});
  INFO(r);
  CHECK(r.code == 5);
  CHECK(r.err.find("berth: cannot reach berthd at http://127.0.0.1:1") != std::string::npos);

  r = cli({"login", "--url", "http://127.0.0.1:1", "--api-key", "k"});
  CHECK(r.code == 5);
  CHECK_FALSE(fs::exists(cli.config_path()));

  Cli nothing(dir, "", "");
  r = nothing({"get", "x"});
  CHECK(r.code == 2);
  CHECK(r.err.find("no berthd URL") != std::string::npos);

  r = nothing({"exec", "ws"});
  CHECK(r.code == 2);
  r = nothing({"cp", "a", "b"});
  CHECK(r.code == 2);
  CHECK(r.err.find("WS:/path") != std::string::npos);
}

TEST_CASE("workspace lifecycle, exec, cp through berthd", "[cli][berthd]") {
  std::string bin = BerthdPath();
  if (bin.empty()) {
    BERTH_SKIP("berthd is not built");
  }
  Berthd berthd(bin);
  Cli cli(berthd.dir(), berthd.url(), berthd.admin_key());

  auto r = cli({"create", "cli-test", "--image", "base", "--size", "small", "--wait", "--json"});
  INFO(r);
  REQUIRE(r.code == 0);
  json ws = Json(r);
  CHECK(ws["state"] == "running");
  CHECK(ws["name"] == "cli-test");
  std::string id = ws["id"];

  r = cli({"create", "cli-test"});
  CHECK(r.code == 6);

  r = cli({"ls", "--json"});
  REQUIRE(r.code == 0);
  json list = Json(r);
  REQUIRE(list.is_array());
  REQUIRE(list.size() == 1);
  CHECK(list[0]["id"] == id);

  r = cli({"ls"});
  CHECK(r.code == 0);
  CHECK(r.out.starts_with("NAME"));
  CHECK(r.out.find("cli-test") != std::string::npos);
  CHECK(r.out.find(id) != std::string::npos);

  r = cli({"get", id, "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["name"] == "cli-test");
  r = cli({"get", "cli-test"});
  CHECK(r.code == 0);
  CHECK(r.out.find("State:") != std::string::npos);
  r = cli({"get", "no-such-workspace"});
  CHECK(r.code == 3);

  // exec: output on the right streams, the remote exit code, stdin, signals.
  r = cli({"exec", "cli-test", "--", "sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(r.code == 3);
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  r = cli({"exec", "cli-test", "echo $((6 * 7))"});
  CHECK(r.code == 0);
  CHECK(r.out == "42\n");
  r = cli({"exec", "cli-test", "--", "cat"}, "hello\nworld\n");
  CHECK(r.code == 0);
  CHECK(r.out == "hello\nworld\n");
  std::string big(3 << 20, 'x');
  r = cli({"exec", "cli-test", "--", "wc", "-c"}, big);
  CHECK(r.code == 0);
  CHECK(Trim(r.out) == std::to_string(big.size()));
  r = cli({"exec", "-n", "cli-test", "--", "cat"}, "not read");
  CHECK(r.code == 0);
  CHECK(r.out.empty());
  r = cli({"exec", "cli-test", "kill -TERM $$"});
  CHECK(r.code == 128 + SIGTERM);
  r = cli({"exec", "--timeout", "1s", "cli-test", "--", "sleep", "30"});
  CHECK(r.code == 128 + SIGKILL);
  r = cli({"exec", "no-such-workspace", "--", "true"});
  CHECK(r.code == 3);

  // cp: a directory up and down (as tar), into an existing directory, single files, stdout.
  // The agent runs on this host, so workspace paths are host paths under the temp dir.
  fs::path local = fs::path(berthd.dir() / "local");
  std::string binary = RandomBytes(300 * 1024);
  WriteFile(local / "src" / "a.txt", "alpha\n");
  WriteFile(local / "src" / "sub" / "b.bin", binary);
  fs::create_directories(local / "src" / "sub" / "empty");
  std::string remote = berthd.dir() / "remote";
  r = cli({"cp", (local / "src").string(), "cli-test:" + remote});
  INFO(r);
  REQUIRE(r.code == 0);
  r = cli({"exec", "cli-test", "--", "cat", remote + "/a.txt"});
  CHECK(r.out == "alpha\n");
  r = cli({"exec", "cli-test", "--", "test", "-d", remote + "/sub/empty"});
  CHECK(r.code == 0);

  r = cli({"cp", "cli-test:" + remote, (local / "back").string()});
  INFO(r);
  REQUIRE(r.code == 0);
  CHECK(ReadFile(local / "back" / "a.txt") == "alpha\n");
  CHECK(ReadFile(local / "back" / "sub" / "b.bin") == binary);
  CHECK(fs::is_directory(local / "back" / "sub" / "empty"));

  r = cli({"cp", (local / "src").string(), "cli-test:" + remote});  // exists: goes inside
  REQUIRE(r.code == 0);
  r = cli({"exec", "cli-test", "--", "cat", remote + "/src/sub/b.bin"});
  CHECK(r.out == binary);

  r = cli({"cp", "cli-test:" + remote + "/a.txt", "-"});
  CHECK(r.code == 0);
  CHECK(r.out == "alpha\n");
  r = cli({"cp", "-", "cli-test:" + remote + "/from-stdin"}, "piped\n");
  CHECK(r.code == 0);
  r = cli({"cp", "cli-test:" + remote + "/from-stdin", (local / "one.txt").string()});
  CHECK(r.code == 0);
  CHECK(ReadFile(local / "one.txt") == "piped\n");
  r = cli({"cp", "cli-test:" + remote + "/missing", (local / "x").string()});
  CHECK(r.code == 3);

  r = cli({"ports", "cli-test", "--json"});
  CHECK(r.code == 0);
  CHECK(Json(r).is_array());

  // stop, start, events, rm.
  r = cli({"stop", "cli-test", "--wait", "--json"});
  INFO(r);
  REQUIRE(r.code == 0);
  CHECK(Json(r)["state"] == "stopped");
  r = cli({"get", "cli-test", "--json"});
  CHECK(Json(r)["state"] == "stopped");
  r = cli({"start", "cli-test", "--wait", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["state"] == "running");
  r = cli({"exec", "cli-test", "--", "cat", remote + "/a.txt"});
  CHECK(r.out == "alpha\n");

  r = cli({"events", "cli-test", "--json"});
  REQUIRE(r.code == 0);
  json events = Json(r);
  REQUIRE(events.is_array());
  std::vector<std::string> types;
  for (const auto& e : events) types.push_back(e.value("type", ""));
  CHECK(std::find(types.begin(), types.end(), "created") != types.end());
  CHECK(std::find(types.begin(), types.end(), "stopped") != types.end());

  // --follow prints what happened, then waits for more (until `timeout` ends it).
  r = RunProgram({"/usr/bin/timeout", "3", BERTH_CLI_BIN, "events", "cli-test", "-f", "--json"},
                 cli.vars(), "");
  CHECK(r.code == 124);
  CHECK(r.out.starts_with("{"));
  CHECK(r.out.find("\"type\":\"created\"") != std::string::npos);

  // berth mcp: the MCP library on stdio with this CLI's URL and key.
  r = cli({"mcp", "--workspace", "cli-test"},
          R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{)"
          R"("protocolVersion":"2025-03-26","capabilities":{},)"
          R"("clientInfo":{"name":"t","version":"1"}}})"
          "\n"
          R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})"
          "\n");
  CHECK(r.code == 0);
  CHECK(r.out.find("\"id\":1") != std::string::npos);
  CHECK(r.out.find("\"tools\":[") != std::string::npos);

  r = cli({"rm", "cli-test"});  // stdin is not a terminal: no question, no deletion
  CHECK(r.code == 2);
  CHECK(r.err.find("--yes") != std::string::npos);
  CHECK(cli({"get", "cli-test"}).code == 0);
  r = cli({"rm", "--yes", "cli-test", "--wait"});
  INFO(r);
  CHECK(r.code == 0);
  CHECK(cli({"get", "cli-test"}).code == 3);
}

TEST_CASE("keys, tenants, login and a wrong key", "[cli][berthd]") {
  std::string bin = BerthdPath();
  if (bin.empty()) {
    BERTH_SKIP("berthd is not built");
  }
  Berthd berthd(bin);
  Cli admin(berthd.dir(), berthd.url(), berthd.admin_key());

  auto r = admin({"tenants", "create", "team-a", "--json"});
  INFO(r);
  REQUIRE(r.code == 0);
  std::string tenant = Json(r)["id"];
  r = admin({"tenants", "ls", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r).dump().find(tenant) != std::string::npos);
  r = admin({"keys", "create", "--tenant", tenant, "--scope", "write", "--name", "ci"});
  REQUIRE(r.code == 0);
  std::string key = Trim(r.out);
  CHECK_FALSE(key.empty());
  r = admin({"keys", "ls", "--json", "--tenant", tenant});
  REQUIRE(r.code == 0);
  json keys = Json(r);
  REQUIRE(keys.size() == 1);
  std::string key_id = keys[0]["id"];

  // login checks the key, then saves it with mode 0600; later calls need nothing else.
  Cli user(berthd.dir(), "", "");
  r = user({"login", "--url", berthd.url(), "--api-key", "wrong-key"});
  CHECK(r.code == 4);
  CHECK_FALSE(fs::exists(user.config_path()));
  r = user({"login", "--url", berthd.url(), "--api-key", key});
  INFO(r);
  REQUIRE(r.code == 0);
  struct stat st {};
  REQUIRE(stat(user.config_path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  r = user({"whoami", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["tenant"]["id"] == tenant);
  r = user({"ls", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r) == json::array());
  // A write key is not an admin key.
  r = user({"tenants", "ls"});
  CHECK(r.code == 4);

  // A wrong key from the environment, then the revoked one.
  Cli wrong(berthd.dir(), berthd.url(), "not-a-key");
  r = wrong({"ls"});
  CHECK(r.code == 4);
  CHECK(r.err.find("refused the API key") != std::string::npos);
  r = admin({"keys", "revoke", key_id});
  CHECK(r.code == 0);
  r = user({"ls"});
  CHECK(r.code == 4);
}

TEST_CASE("berth shell: a PTY that follows resizes and restores the terminal", "[cli][berthd]") {
  std::string bin = BerthdPath();
  if (bin.empty()) {
    BERTH_SKIP("berthd is not built");
  }
  Berthd berthd(bin);
  Cli cli(berthd.dir(), berthd.url(), berthd.admin_key());
  auto r = cli({"create", "cli-shell", "--wait"});
  INFO(r);
  REQUIRE(r.code == 0);

  // sh runs berth, then reports its status and the terminal's settings after it.
  Pty pty({"/bin/sh", "-c", "\"$0\" shell cli-shell; echo \"rc=$?\"; stty -a", BERTH_CLI_BIN},
          cli.vars());
  pty.Write("echo ready-$((40 + 2))\n");
  REQUIRE(pty.WaitFor("ready-42"));
  pty.Write("stty size\n");
  REQUIRE(pty.WaitFor("24 80"));
  size_t mark = pty.output().size();
  pty.Resize(30, 100);
  // The resize travels as SIGWINCH → a resize message; ask until the remote PTY has it.
  bool resized = false;
  for (int i = 0; i < 50 && !resized; ++i) {
    pty.Write("stty size\n");
    resized = pty.WaitFor("30 100", mark, std::chrono::seconds(1));
  }
  CHECK(resized);
  pty.Write("exit 7\n");
  REQUIRE(pty.WaitFor("rc=7"));
  REQUIRE(pty.WaitFor("speed"));  // stty -a's first line
  CHECK(pty.Wait() == 0);
  std::string after = pty.output().substr(pty.output().find("rc=7"));
  INFO(after);
  CHECK(after.find("-icanon") == std::string::npos);
  CHECK(after.find(" icanon") != std::string::npos);
  CHECK(after.find("-echo ") == std::string::npos);
  CHECK(after.find(" echo ") != std::string::npos);
  CHECK(cli({"rm", "--yes", "cli-shell"}).code == 0);
}
