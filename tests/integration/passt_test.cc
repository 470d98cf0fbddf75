// The real passt, started as the QEMU user the way berthd starts it for each VM.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <catch2/catch.hpp>

#include "controller/network/passt.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

using namespace berth;

TEST_CASE("passt command line keeps forwards on loopback and the gateway unmapped", "[passt]") {
  network::PasstOptions o;
  o.socket_path = "/s";
  o.pid_file = "/p";
  o.tcp_forwards = {{40001, 1024}};
  auto argv = network::PasstArgv(o);
  auto has = [&](const std::string& a) { return std::find(argv.begin(), argv.end(), a) != argv.end(); };
  CHECK(has("--no-map-gw"));
  CHECK(has("--one-off"));
  CHECK(has("127.0.0.1/40001:1024"));
  // The agent's forward and a debug forward (network.debug_forwards): one --tcp-ports each,
  // both on loopback.
  o.tcp_forwards = {{40001, 1024}, {40002, 8080}};
  argv = network::PasstArgv(o);
  CHECK(std::count(argv.begin(), argv.end(), std::string("--tcp-ports")) == 2);
  CHECK(has("127.0.0.1/40001:1024"));
  CHECK(has("127.0.0.1/40002:8080"));
  // No forward at all (vsock without debug forwards): nothing inbound.
  o.tcp_forwards.clear();
  argv = network::PasstArgv(o);
  auto tcp = std::find(argv.begin(), argv.end(), std::string("--tcp-ports"));
  REQUIRE(tcp != argv.end());
  CHECK(*std::next(tcp) == "none");
}

TEST_CASE("passt starts as the QEMU user and serves its socket", "[passt]") {
  if (geteuid() != 0 || access("/usr/bin/passt", X_OK) != 0) {
    BERTH_SKIP("needs root and /usr/bin/passt");
  }
  testing::TempDir dir("berth-passt");
  // The QEMU user must be able to create its socket here.
  REQUIRE(chmod(dir.path().c_str(), 0777) == 0);
  network::PasstOptions o;
  o.socket_path = dir / "passt.sock";
  o.pid_file = dir / "passt.pid";
  o.log_file = dir / "passt.log";
  auto pid = network::StartPasst(o);
  REQUIRE(pid);
  struct stat st {};
  REQUIRE(stat(o.socket_path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  std::ifstream status("/proc/" + std::to_string(*pid) + "/status");
  std::string line;
  bool unprivileged = false;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) == 0) unprivileged = line.find("\t0\t") == std::string::npos;
  }
  CHECK(unprivileged);
  CHECK(network::RunningPasst(o.pid_file).value() == *pid);
  kill(*pid, SIGTERM);
  for (int i = 0; i < 100 && kill(*pid, 0) == 0; ++i) usleep(20'000);
  CHECK_FALSE(network::RunningPasst(o.pid_file));
}

TEST_CASE("passt runs as the workspace's own uid and points the guest's DNS at berthd's resolver", "[passt]") {
  if (geteuid() != 0 || access("/usr/bin/passt", X_OK) != 0) {
    FAIL("needs root and passt (scripts/setup installs it)");
  }
  testing::TempDir dir("berth-passt-uid");
  constexpr uid_t kUid = 2000123;  // no passwd entry, as in production
  REQUIRE(chown(dir.path().c_str(), kUid, kUid) == 0);
  network::PasstOptions o;
  o.socket_path = dir / "passt.sock";
  o.pid_file = dir / "passt.pid";
  o.log_file = dir / "passt.log";
  o.uid = kUid;
  o.gid = kUid;
  o.dns = network::kGuestDnsAddress;
  auto argv = network::PasstArgv(o);
  CHECK(std::find(argv.begin(), argv.end(), std::string(network::kGuestDnsAddress)) != argv.end());
  auto pid = network::StartPasst(o);
  REQUIRE(pid);
  CHECK(network::ProcessUid(*pid).value() == kUid);
  CHECK(network::RunningPasst(o.pid_file, kUid).value() == *pid);
  // Another uid's check does not take it for its own passt.
  CHECK_FALSE(network::RunningPasst(o.pid_file, kUid + 1));
  kill(*pid, SIGTERM);
  CHECK(testing::WaitFor([&] { return !network::RunningPasst(o.pid_file); }));
}

TEST_CASE("a pid file that is a symlink is not followed", "[passt]") {
  testing::TempDir dir("berth-passt-link");
  std::ofstream(dir / "real") << getpid() << "\n";
  REQUIRE(symlink((dir / "real").c_str(), (dir / "passt.pid").c_str()) == 0);
  CHECK(network::ReadPidFile(dir / "real").value() == getpid());
  auto linked = network::ReadPidFile(dir / "passt.pid");
  REQUIRE_FALSE(linked);
  CHECK(linked.error().code == ErrorCode::kNotFound);
}

TEST_CASE("passt refuses to run as root", "[passt]") {
  network::PasstOptions o;
  o.uid = 0;
  auto r = network::StartPasst(o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kInvalidArgument);
}
