// The real `berth` binary against a real berthd, started with --transport unix (a real
// berth-agent per workspace as a host process, no VM), so that exec, files and sessions run end
// to end in seconds. `berth shell` runs in a pseudo-terminal.
//
// berthd comes from the build (BERTHD_BIN) or from $BERTHD_BIN; the [berthd] cases skip
// (BERTH_SKIP, which scripts/test reports) when neither exists.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cctype>
#include <thread>

#include <catch2/catch.hpp>

#include "common/client/api_client.h"
#include "common/v1/time.h"
#include "tests/integration/cli_test_util.h"
#include "tests/support/skip.h"

using namespace berth::cli_test;

namespace {

// A TCP server on a loopback port of its own, on a thread: it reads each connection to its
// end and answers what it read in upper case. On the unix transport a workspace's "guest" is
// this host, so a tunnel to its port reaches it.
class UpperServer {
 public:
  UpperServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof(addr);
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~UpperServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string data;
      char buf[4096];
      ssize_t n = 0;
      // One connection at a time, each bounded by its peer's half-close (or 10 s of polls).
      for (int idle = 0; idle < 100 && !stop_;) {
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 100) <= 0) {
          ++idle;
          continue;
        }
        if ((n = read(c, buf, sizeof(buf))) <= 0) break;
        data.append(buf, static_cast<size_t>(n));
      }
      for (auto& ch : data) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      (void)!write(c, data.data(), data.size());  // the test's RoundTrip checks what arrived
      close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Connects to 127.0.0.1:port, sends `data`, half-closes and reads to the end (10 s at most).
// "" when it could not connect.
std::string RoundTrip(int port, const std::string& data) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  REQUIRE(write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
  shutdown(fd, SHUT_WR);
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return got;
}

std::vector<std::string> EventTypes(const Cli& cli, const std::string& ws) {
  auto r = cli({"events", ws, "--json", "--limit", "1000"});
  INFO(r);
  REQUIRE(r.code == 0);
  std::vector<std::string> types;
  for (const auto& e : Json(r)) types.push_back(e.value("type", ""));
  return types;
}

}  // namespace

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

  {
    // On this transport the workspace's "guest" is this host: a port of ours listens in it.
    UpperServer listening;
    r = cli({"ports", "cli-test", "--json"});
    CHECK(r.code == 0);
    json ports = Json(r);
    REQUIRE(ports.is_array());
    std::vector<json> ours;
    for (const auto& p : ports) {
      if (p.value("port", 0) == listening.port()) ours.push_back(p);
    }
    INFO(ports.dump());
    REQUIRE(ours.size() == 1);
    CHECK(ours[0]["address"] == "127.0.0.1");
    CHECK(ours[0]["pid"] == getpid());
    r = cli({"ports", "cli-test"});
    CHECK(r.code == 0);
    CHECK(r.out.starts_with("PORT"));
    CHECK(r.out.find(fmt::format("\n{} ", listening.port())) != std::string::npos);
  }

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
  INFO(events.dump());
  REQUIRE_FALSE(types.empty());
  CHECK(types.front() == "created");
  CHECK(std::count(types.begin(), types.end(), "stopped") == 1);
  CHECK(types.back() == "session");  // the cat just before (berth exec runs a session), after the start
  CHECK(std::find(types.begin(), types.end(), "file_written") != types.end());  // the cp

  // --type and --actor go to berthd: only the lifecycle, only what this CLI's key did.
  r = cli({"events", "cli-test", "--json", "--type", "started,stopp*"});
  REQUIRE(r.code == 0);
  std::vector<std::string> picked;
  for (const auto& e : Json(r)) picked.push_back(e.value("type", ""));
  CHECK(picked == std::vector<std::string>{"started", "stopping", "stopped", "started"});
  r = cli({"events", "cli-test", "--json", "--actor", "system", "--type", "stopping"});
  REQUIRE(r.code == 0);
  CHECK(Json(r).empty());  // the stop was this key's
  r = cli({"events", "cli-test", "--type", "session"});
  REQUIRE(r.code == 0);
  INFO(r.out);
  CHECK(r.out.find("`cat " + remote + "/a.txt` exited 0 after") != std::string::npos);
  CHECK(r.out.find("[key_") != std::string::npos);  // who ran it, in the table
  r = cli({"events", "cli-test", "--type", "no;such"});
  CHECK(r.code == 2);  // invalid_argument: a usage error

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
  // A create refused by the tenant's quota prints berthd's message as it is, exit code 1.
  {
    auto endpoint = berth::Endpoint::Parse("tcp:" + berthd.url().substr(std::string_view("http://").size()));
    REQUIRE(endpoint);
    berth::client::ApiClient op(*endpoint, berthd.admin_key());
    REQUIRE(op.Json(berth::http::bhttp::verb::patch, "/v1/tenants/" + tenant,
                    json{{"limits", {{"workspaces", 0}}}}));
    r = user({"create", "over"});
    INFO(r);
    CHECK(r.code == 1);
    CHECK(r.err.find(fmt::format("berth: tenant {} would use 1 workspaces of its limit of 0", tenant)) !=
          std::string::npos);
  }
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

TEST_CASE("berth hibernate, restart, port-forward, usage and logout do what they say",
          "[cli][berthd]") {
  std::string bin = BerthdPath();
  if (bin.empty()) {
    BERTH_SKIP("berthd is not built");
  }
  Berthd berthd(bin);
  Cli cli(berthd.dir(), berthd.url(), berthd.admin_key());
  auto r = cli({"create", "cli-more", "--wait", "--json"});
  INFO(r);
  REQUIRE(r.code == 0);
  std::string id = Json(r)["id"];

  // hibernate --wait lands in hibernated; a second one changes nothing; start resumes.
  r = cli({"hibernate", "cli-more", "--wait", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["state"] == "hibernated");
  r = cli({"get", "cli-more", "--json"});
  CHECK(Json(r)["state"] == "hibernated");
  r = cli({"hibernate", "cli-more", "--json"});  // already there: no error, no change
  CHECK(r.code == 0);
  CHECK(Json(r)["state"] == "hibernated");
  r = cli({"start", "cli-more", "--wait", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["state"] == "running");
  auto types = EventTypes(cli, "cli-more");
  CHECK(std::count(types.begin(), types.end(), "hibernated") == 1);

  // restart --wait: stopped and started again, running at the end.
  size_t before = types.size();
  r = cli({"restart", "cli-more", "--wait", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["state"] == "running");
  types = EventTypes(cli, "cli-more");
  REQUIRE(types.size() >= before);
  std::vector<std::string> restart(types.begin() + static_cast<std::ptrdiff_t>(before), types.end());
  CHECK(restart == std::vector<std::string>{"stopping", "stopped", "starting", "started"});

  // port-forward: a local port to a server in the workspace (the host, on this transport),
  // until Ctrl-C; 0 as the local port picks a free one and says which.
  UpperServer server;
  int remote = server.port();
  REQUIRE(RoundTrip(remote, "x") == "X");
  Pty forward({BERTH_CLI_BIN, "port-forward", "cli-more", fmt::format("0:{}", remote)}, cli.vars());
  REQUIRE(forward.WaitFor("(Ctrl-C to stop)"));
  std::string line = forward.output();
  INFO(line);
  auto at = line.find("forwarding 127.0.0.1:");
  REQUIRE(at != std::string::npos);
  int local = std::atoi(line.c_str() + at + std::string("forwarding 127.0.0.1:").size());
  REQUIRE(local > 0);
  CHECK(local != remote);
  CHECK(line.find(fmt::format("-> cli-more:{}", remote)) != std::string::npos);
  CHECK(RoundTrip(local, "through the forward") == "THROUGH THE FORWARD");
  CHECK(RoundTrip(local, "twice") == "TWICE");  // one tunnel per connection
  forward.Write("\x03");  // Ctrl-C: SIGINT from the terminal
  CHECK(forward.Wait() == 0);
  CHECK(RoundTrip(local, "gone") == "");  // the local port is closed with it
  r = cli({"port-forward", "cli-more", "99999"});
  CHECK(r.code == 2);
  CHECK(r.err.find("bad port '99999'") != std::string::npos);

  // usage: this workspace's running time, as JSON and as a table with a total.
  r = cli({"usage", "--json"});
  REQUIRE(r.code == 0);
  json usage = Json(r);
  REQUIRE(usage["workspaces"].size() == 1);
  CHECK(usage["workspaces"][0]["workspace"] == id);
  CHECK(usage["workspaces"][0]["name"] == "cli-more");
  r = cli({"usage"});
  REQUIRE(r.code == 0);
  CHECK(r.out.starts_with("From "));
  CHECK(r.out.find("cli-more") != std::string::npos);
  CHECK(r.out.find("TOTAL") != std::string::npos);
  r = cli({"usage", "--from", "1000000000", "--to", "1000003600", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["workspaces"].empty());
  r = cli({"usage", "--from", "yesterday"});
  CHECK(r.code == 2);

  // logout forgets the saved URL and key: the next command has none.
  Cli user(berthd.dir(), "", "");
  r = user({"login", "--url", berthd.url(), "--api-key", berthd.admin_key()});
  REQUIRE(r.code == 0);
  REQUIRE(user({"whoami"}).code == 0);
  r = user({"logout"});
  CHECK(r.code == 0);
  CHECK(r.out == "removed the URL and API key from " + user.config_path() + "\n");
  std::string saved = ReadFile(user.config_path());
  CHECK(saved.find("api_key") == std::string::npos);
  CHECK(saved.find(berthd.admin_key()) == std::string::npos);
  r = user({"whoami"});
  CHECK(r.code == 2);
  CHECK(r.err.find("no berthd URL") != std::string::npos);
  CHECK(user({"logout"}).code == 0);  // nothing saved: still fine

  CHECK(cli({"rm", "--yes", "cli-more", "--wait"}).code == 0);
}

TEST_CASE("berthd refuses a bad --config with exit 2 and a message naming the problem",
          "[berthd][config]") {
  std::string bin = BerthdPath();
  if (bin.empty()) {
    BERTH_SKIP("berthd is not built");
  }
  TempDir dir("berthd-config");
  struct Case {
    std::string text;      // the file's content ("" : no file at all)
    std::string expected;  // in stderr, after the path
  };
  std::vector<Case> cases = {
      {"", ": No such file or directory"},
      {"{\"listen\": ", " is not valid JSON"},
      {"[1, 2]", " is not a JSON object"},
      {"{\"surprise\": 1}", ": unknown key 'surprise'"},
      {"{\"listen\": 5}", ": 'listen': "},
      {"{\"boot_timeout_s\": \"soon\"}", ": 'boot_timeout_s': "},
      {"{\"network\": {\"isolation\": \"maybe\"}}", ": network: "},
  };
  int n = 0;
  for (const auto& c : cases) {
    std::string path = dir / fmt::format("config-{}.json", n++);
    if (!c.text.empty()) WriteFile(path, c.text);
    auto r = RunProgram({bin, "--config", path, "--data", dir / "data"}, {}, "",
                        std::chrono::seconds(30));
    INFO(c.text << "\n" << r);
    CHECK(r.code == 2);
    CHECK(r.err.starts_with("berthd: "));
    CHECK(r.err.find(path + c.expected) != std::string::npos);
    CHECK(r.out.find("listening on") == std::string::npos);
  }
  // Well-formed but wrong: refused at start, before it listens, with exit 1.
  std::string path = dir / "transport.json";
  WriteFile(path, "{\"transport\": \"carrier-pigeon\", \"listen\": \"127.0.0.1:0\", "
                  "\"libvirt_uri\": \"test:///default\"}");
  auto r = RunProgram({bin, "--config", path, "--data", dir / "data"}, {}, "",
                      std::chrono::seconds(60));
  INFO(r);
  CHECK(r.code == 1);
  CHECK(r.err.find("unknown transport 'carrier-pigeon'") != std::string::npos);
  CHECK(r.out.find("listening on") == std::string::npos);
}

TEST_CASE("berth preview prints the link alone; previews lists and revokes; ports shows URLs",
          "[cli][berthd]") {
  std::string bin = BerthdPath();
  if (bin.empty()) {
    BERTH_SKIP("berthd is not built");
  }
  Berthd berthd(bin);
  Cli cli(berthd.dir(), berthd.url(), berthd.admin_key());
  auto r = cli({"create", "cli-pv", "--wait", "--json"});
  INFO(r);
  REQUIRE(r.code == 0);
  UpperServer server;
  int port = server.port();
  std::string berthd_port = berthd.url().substr(berthd.url().rfind(':') + 1);
  std::string url = fmt::format("http://{}-cli-pv.preview.localhost:{}/", port, berthd_port);

  // A private preview: its link (the URL with the token) is the one line on stdout, so that
  // `open "$(berth preview ws PORT)"` works; what it is goes to stderr.
  r = cli({"preview", "cli-pv", std::to_string(port)});
  INFO(r);
  REQUIRE(r.code == 0);
  CHECK(r.out.starts_with(url + "?berth_preview_token="));
  CHECK(r.out.ends_with("\n"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  CHECK(r.err.find("private preview") != std::string::npos);
  CHECK(r.err.find("--revoke") != std::string::npos);

  // A public one for 2 h, as the record: the URL and no token.
  r = cli({"preview", "cli-pv", std::to_string(port), "--public", "--expires", "2h", "--json"});
  REQUIRE(r.code == 0);
  json pub = Json(r);
  CHECK(pub["public"] == true);
  CHECK(pub["url"] == url);
  CHECK_FALSE(pub.contains("token"));
  auto expires_at = berth::v1::ParseTime(pub["expires_at"].get<std::string>());
  auto created_at = berth::v1::ParseTime(pub["created_at"].get<std::string>());
  REQUIRE(expires_at);
  REQUIRE(created_at);
  CHECK(*expires_at - *created_at == 7200);
  r = cli({"preview", "cli-pv", std::to_string(port), "--public"});
  REQUIRE(r.code == 0);
  CHECK(r.out == url + "\n");

  // Bad input is a usage error, before or at berthd; an unknown workspace is not found.
  r = cli({"preview", "cli-pv", "99999"});
  CHECK(r.code == 2);
  r = cli({"preview", "cli-pv", "80", "--expires", "soon"});
  CHECK(r.code == 2);
  CHECK(r.err.find("--expires") != std::string::npos);
  r = cli({"preview", "cli-pv", "80", "--expires", "400d"});
  CHECK(r.code == 2);  // past berthd's maximum (30 days)
  r = cli({"preview", "no-such-ws", "80"});
  CHECK(r.code == 3);

  // previews: newest first, as JSON and as a table.
  r = cli({"previews", "cli-pv", "--json"});
  REQUIRE(r.code == 0);
  json listed = Json(r)["previews"];
  REQUIRE(listed.size() == 3);
  CHECK(listed[0]["public"] == true);
  CHECK(listed[2]["public"] == false);
  CHECK_FALSE(listed[2].contains("token"));
  std::string private_id = listed[2]["id"];
  r = cli({"previews", "cli-pv"});
  REQUIRE(r.code == 0);
  CHECK(r.out.starts_with("ID"));
  CHECK(r.out.find("LAST USED") != std::string::npos);
  CHECK(r.out.find(private_id) != std::string::npos);
  CHECK(r.out.find(url) != std::string::npos);

  // --revoke: it says so, the list shows it revoked; an unknown id is not found.
  r = cli({"previews", "cli-pv", "--revoke", private_id});
  CHECK(r.code == 0);
  CHECK(r.out == private_id + ": revoked\n");
  r = cli({"previews", "cli-pv", "--json"});
  REQUIRE(r.code == 0);
  // The whole answer is held in a variable: a range-for over a member of a temporary
  // (`Json(r)["previews"]`) reads freed memory, since C++23's lifetime extension (P2718) is
  // not in g++ 12.
  json after_revoke = Json(r);
  bool revoked_seen = false;
  for (const auto& p : after_revoke["previews"]) {
    if (p["id"] == private_id) revoked_seen = p["status"] == "revoked";
  }
  CHECK(revoked_seen);
  r = cli({"previews", "cli-pv", "--revoke", "pv_nope"});
  CHECK(r.code == 3);

  // ports: each port's preview URL, in the table and in the JSON.
  r = cli({"ports", "cli-pv"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("PREVIEW") != std::string::npos);
  CHECK(r.out.find(url) != std::string::npos);
  r = cli({"ports", "cli-pv", "--json"});
  REQUIRE(r.code == 0);
  bool found = false;
  for (const auto& p : Json(r)) {
    if (p["port"] == port) found = p["preview_url"] == url;
  }
  CHECK(found);

  CHECK(cli({"rm", "--yes", "cli-pv", "--wait"}).code == 0);
}

TEST_CASE("berth checkpoint prints the id alone; checkpoints lists and deletes; restore prints the undo "
          "id; a checkpoint the hypervisor cannot take (hibernated, on libvirt's test driver) exits 6 with why",
          "[cli][berthd][checkpoints]") {
  std::string bin = BerthdPath();
  if (bin.empty()) {
    BERTH_SKIP("berthd is not built");
  }
  Berthd berthd(bin);
  Cli cli(berthd.dir(), berthd.url(), berthd.admin_key());
  auto r = cli({"create", "cli-cp", "--wait"});
  INFO(r);
  REQUIRE(r.code == 0);

  // Hibernated: berthd repoints the managed save at new disks, which libvirt's test driver
  // cannot; its 409 is a conflict (exit 6) with the message on stderr, nothing on stdout.
  REQUIRE(cli({"hibernate", "cli-cp", "--wait"}).code == 0);
  r = cli({"checkpoint", "cli-cp"});
  CHECK(r.code == 6);
  CHECK(r.out.empty());
  CHECK(r.err.starts_with("berth: "));
  CHECK(r.err.find("not supported") != std::string::npos);
  // It left nothing behind: the checkpoint of its disks below takes generation 1.
  REQUIRE(cli({"stop", "cli-cp", "--wait"}).code == 0);

  // --memory sends "memory": true: of a stopped workspace, berthd's 409 (exit 6) says it has no
  // memory to checkpoint, which it says of no request without it.
  r = cli({"checkpoint", "cli-cp", "--memory"});
  CHECK(r.code == 6);
  CHECK(r.out.empty());
  CHECK(r.err.find("no memory to checkpoint") != std::string::npos);

  // The id alone on stdout, so that `cp=$(berth checkpoint ws)` works; how to restore on stderr.
  r = cli({"checkpoint", "cli-cp", "--name", "first"});
  REQUIRE(r.code == 0);
  REQUIRE(r.out.starts_with("cp_"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  std::string first = r.out.substr(0, r.out.size() - 1);
  CHECK(r.err.find("berth restore cli-cp " + first) != std::string::npos);
  CHECK(r.err.find("(disks, ") != std::string::npos);  // no memory: what it holds is its disks
  r = cli({"checkpoint", "cli-cp", "--name", "first"});
  CHECK(r.code == 6);  // the name is taken
  r = cli({"checkpoint", "cli-cp", "--json"});
  REQUIRE(r.code == 0);
  json second = Json(r);
  CHECK(second["kind"] == "manual");
  CHECK(second["memory"] == false);
  CHECK(second["parent"] == first);

  // checkpoints: newest first, as a table and as JSON.
  r = cli({"checkpoints", "cli-cp"});
  REQUIRE(r.code == 0);
  CHECK(r.out.starts_with("NAME"));
  for (const char* column : {"ID", "KIND", "SAVED", "SIZE", "CREATED", "PARENT"}) {
    CHECK(r.out.find(column) != std::string::npos);
  }
  CHECK(r.out.find("first") != std::string::npos);
  CHECK(r.out.find(first) != std::string::npos);
  CHECK(r.out.find(" ago") != std::string::npos);
  CHECK(r.out.find("  disks  ") != std::string::npos);
  CHECK(r.out.find(second["id"].get<std::string>()) < r.out.find("first "));
  r = cli({"checkpoints", "cli-cp", "--json"});
  REQUIRE(r.code == 0);
  json listed = Json(r);
  REQUIRE(listed["checkpoints"].size() == 2);
  CHECK(listed["checkpoints"][0]["id"] == second["id"]);
  CHECK(listed["checkpoints"][1]["id"] == first);

  // restore by name: what it did and the undo checkpoint's id on stdout; the undo is listed.
  r = cli({"restore", "cli-cp", "first"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("restored cli-cp to checkpoint first") != std::string::npos);
  auto at = r.out.find("undo checkpoint: cp_");
  REQUIRE(at != std::string::npos);
  std::string undo = r.out.substr(at + 17, r.out.find('\n', at) - at - 17);
  CHECK(r.err.find("berth restore cli-cp " + undo) != std::string::npos);
  r = cli({"checkpoints", "cli-cp", "--json"});
  REQUIRE(r.code == 0);
  json after_restore = Json(r);
  REQUIRE(after_restore["checkpoints"].size() == 3);
  CHECK(after_restore["checkpoints"][0]["id"] == undo);
  CHECK(after_restore["checkpoints"][0]["kind"] == "before_restore");
  // Undoing it, without another undo checkpoint.
  r = cli({"restore", "cli-cp", undo, "--no-undo", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["undo"].is_null());
  CHECK(Json(r)["workspace"]["name"] == "cli-cp");
  r = cli({"checkpoints", "cli-cp", "--json"});
  CHECK(Json(r)["checkpoints"].size() == 3);

  // --rm: by name and by id; each says so and is gone; an unknown one is not found (exit 3)
  // while the others are still deleted.
  r = cli({"checkpoints", "cli-cp", "--rm", "first", "cp_nope", second["id"].get<std::string>()});
  CHECK(r.code == 3);
  CHECK(r.out.find("first: deleted\n") != std::string::npos);
  CHECK(r.out.find(second["id"].get<std::string>() + ": deleted\n") != std::string::npos);
  CHECK(r.err.find("cp_nope") != std::string::npos);
  r = cli({"checkpoints", "cli-cp", "--json"});
  REQUIRE(r.code == 0);
  json left = Json(r);
  REQUIRE(left["checkpoints"].size() == 1);
  CHECK(left["checkpoints"][0]["id"] == undo);

  // Unknown workspace: not found; missing arguments: usage.
  CHECK(cli({"checkpoint", "no-such-ws"}).code == 3);
  CHECK(cli({"checkpoints", "no-such-ws"}).code == 3);
  CHECK(cli({"restore", "cli-cp"}).code == 2);
  CHECK(cli({"rm", "--yes", "cli-cp", "--wait"}).code == 0);
}

TEST_CASE("berth fork makes running forks of a checkpoint (NAME-1..N with --count) that name it; a template "
          "needs a checkpoint with memory (exit 6 saying so); create --template refuses flags it would ignore",
          "[cli][berthd][forks]") {
  std::string bin = BerthdPath();
  if (bin.empty()) {
    BERTH_SKIP("berthd is not built");
  }
  Berthd berthd(bin);
  Cli cli(berthd.dir(), berthd.url(), berthd.admin_key());
  auto r = cli({"create", "cli-src", "--wait"});
  INFO(r);
  REQUIRE(r.code == 0);
  REQUIRE(cli({"stop", "cli-src", "--wait"}).code == 0);
  r = cli({"checkpoint", "cli-src", "--name", "base"});
  REQUIRE(r.code == 0);
  std::string base = r.out.substr(0, r.out.size() - 1);

  // Two forks of one checkpoint, waited for: both running, named NAME-1 and NAME-2.
  r = cli({"fork", "cli-src", "twig", "--checkpoint", "base", "--count", "2", "--wait", "--json"});
  REQUIRE(r.code == 0);
  json forks = Json(r);
  REQUIRE(forks.size() == 2);
  CHECK(forks[0]["name"] == "twig-1");
  CHECK(forks[1]["name"] == "twig-2");
  for (const auto& f : forks) {
    CHECK(f["state"] == "running");
    CHECK(f["forked_from"] == base);
  }
  // --count without --checkpoint: refused before any request (forks made together share one).
  r = cli({"fork", "cli-src", "many", "--count", "3"});
  CHECK(r.code == 2);
  CHECK(r.err.find("--count needs --checkpoint") != std::string::npos);
  // Without --checkpoint berthd takes one of the source now: the fork names it, and it is listed.
  r = cli({"fork", "cli-src", "now"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("now") != std::string::npos);
  r = cli({"get", "now", "--json"});
  REQUIRE(r.code == 0);
  std::string taken = Json(r)["forked_from"];
  CHECK(taken != base);
  r = cli({"checkpoints", "cli-src", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["checkpoints"][0]["id"] == taken);

  // Templates: a disk-only checkpoint is no template (409, exit 6, saying why); none is listed.
  r = cli({"template", "create", "tpl", "--from", "cli-src", "--checkpoint", "base"});
  CHECK(r.code == 6);
  CHECK(r.out.empty());
  CHECK(r.err.find("memory") != std::string::npos);
  r = cli({"template", "ls"});
  REQUIRE(r.code == 0);
  CHECK(r.out.starts_with("NAME"));
  CHECK(r.out.find("tpl") == std::string::npos);
  r = cli({"template", "ls", "--json"});
  REQUIRE(r.code == 0);
  CHECK(Json(r)["templates"].empty());
  CHECK(cli({"template", "rm", "tpl"}).code == 3);
  CHECK(cli({"create", "from-tpl", "--template", "tpl"}).code == 3);
  // The template's settings are the workspace's: a flag that would set them is refused, not ignored.
  r = cli({"create", "from-tpl", "--template", "tpl", "--cpus", "4"});
  CHECK(r.code == 2);
  CHECK(r.err.find("--template gives") != std::string::npos);

  // A template built from a script file: --wait follows the build; one that fails prints the
  // end of its output and why (exit 6), and ls says failed.
  std::filesystem::path script = berthd.dir() / "setup.sh";
  std::ofstream(script) << "echo installing\necho 'E: Unable to locate package nope' >&2\nexit 3\n";
  r = cli({"template", "create", "built", "--script", script.string(), "--wait"});
  CHECK(r.code == 6);
  CHECK(r.err.find("installing\nE: Unable to locate package nope\n") != std::string::npos);
  CHECK(r.err.find("template built failed to build: the script exited with 3") != std::string::npos);
  r = cli({"template", "ls"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("built  failed") != std::string::npos);
  r = cli({"template", "create", "other", "--script", script.string(), "--from", "cli-src"});
  CHECK(r.code == 2);
  CHECK(r.err.find("either --from WORKSPACE or --script FILE") != std::string::npos);
  CHECK(cli({"template", "rm", "built"}).code == 0);

  // The checkpoints the forks stand on cannot go; the forks can, and then they can.
  r = cli({"checkpoints", "cli-src", "--rm", "base"});
  CHECK(r.code == 6);
  CHECK(r.err.find("twig-1") != std::string::npos);
  CHECK(cli({"rm", "--yes", "twig-1", "twig-2", "now", "--wait"}).code == 0);
  CHECK(cli({"checkpoints", "cli-src", "--rm", "base"}).code == 0);
  CHECK(cli({"rm", "--yes", "cli-src", "--wait"}).code == 0);
}

TEST_CASE("berth desktop: control says who holds it, a screen that is not there is exit 5 with a "
          "reason, bad actions are refused before any request",
          "[cli][berthd]") {
  std::string bin = BerthdPath();
  if (bin.empty()) {
    BERTH_SKIP("berthd is not built");
  }
  Berthd berthd(bin);
  Cli cli(berthd.dir(), berthd.url(), berthd.admin_key());
  REQUIRE(cli({"create", "cli-desk", "--wait"}).code == 0);
  auto r = cli({"desktop", "control", "cli-desk"});
  INFO(r);
  CHECK(r.code == 0);
  CHECK(r.out == "holder: agent\n");
  r = cli({"desktop", "control", "cli-desk", "--json"});
  CHECK(Json(r)["holder"] == "agent");
  // --transport unix runs no QEMU: no screen, said plainly.
  r = cli({"desktop", "screenshot", "cli-desk", "-o", (berthd.dir().path() / "s.png").string()});
  CHECK(r.code == 5);
  CHECK(r.err.find("screen is not available") != std::string::npos);
  CHECK_FALSE(fs::exists(berthd.dir().path() / "s.png"));
  r = cli({"desktop", "act", "cli-desk", "[{\"type\": "});
  CHECK(r.code == 2);
  CHECK(cli({"desktop", "screenshot", "cli-desk", "--scale", "3"}).code == 2);
  CHECK(cli({"desktop", "nosuch", "cli-desk"}).code == 2);
  // A host agent's machine has no desktop clipboard tool: berthd says so (409), the CLI exits 6.
  r = cli({"desktop", "clipboard", "cli-desk"});
  CHECK(r.code == 6);
  CHECK(r.err.find("no desktop clipboard") != std::string::npos);
  r = cli({"desktop", "clipboard", "cli-desk", "--set", "h\u00e9llo"});
  CHECK(r.code == 6);
  CHECK(r.err.find("not the desktop image") != std::string::npos);
}
