// A 1 GiB upload and download through the real berth-agent binary, run as a child process so
// that its peak resident memory (VmHWM) can be read: streaming must keep it bounded.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/client/files.h"
#include "tests/integration/files_test_util.h"
#include "tests/support/temp_dir.h"

extern char** environ;

using namespace berth;

namespace {

constexpr uint64_t kSize = 1ull << 30;
// The agent's peak RSS may grow by less than this while moving kSize bytes each way.
constexpr uint64_t kMaxGrowthKiB = 64 * 1024;

uint64_t VmHwmKiB(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6));
  }
  return 0;
}

class AgentProcess {
 public:
  explicit AgentProcess(const testing::TempDir& dir)
      : socket_(dir / "agent.sock"), token_("files-large-test-token-0123456789") {
    std::vector<std::string> args = {BERTH_AGENT_BIN,  "--listen",       "unix:" + socket_,
                                     "--token-source", "env",            "--local-socket",
                                     "",               "--default-user", "root",
                                     "--log-level",    "warn"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = {"BERTH_AGENT_TOKEN=" + token_};
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, BERTH_AGENT_BIN, nullptr, nullptr, argv.data(), envp.data()) != 0) {
      pid_ = -1;
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  pid_t pid() const { return pid_; }
  client::ApiClient Client() const {
    return client::ApiClient(*Endpoint::Parse("unix:" + socket_), token_);
  }

 private:
  std::string socket_;
  std::string token_;
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("1 GiB streams both ways with bounded agent memory", "[files][large]") {
  testing::TempDir dir("berth-large");
  AgentProcess agent(dir);
  REQUIRE(agent.pid() > 0);
  auto api = agent.Client();
  REQUIRE(testing::WaitFor([&] { return api.Json(http::bhttp::verb::get, "/v1/info").has_value(); }));
  std::string remote = dir / "big.bin";

  // Warm up (threads, buffers, the allocator's first arenas) before taking the baseline.
  std::string small = testing::RandomBytes(4 << 20, 1);
  REQUIRE(client::Upload(api, "/v1", dir / "warm", [&, off = size_t{0}](char* b, size_t n) mutable
                             -> Result<size_t> {
                           size_t k = std::min(n, small.size() - off);
                           std::memcpy(b, small.data() + off, k);
                           off += k;
                           return k;
                         },
                         small.size()));
  REQUIRE(client::Download(api, "/v1", dir / "warm", [](std::string_view) -> Status { return {}; }));
  uint64_t baseline = VmHwmKiB(agent.pid());
  REQUIRE(baseline > 0);

  testing::Sha256 sent_hash;
  testing::ByteGenerator gen(42);
  uint64_t produced = 0;
  client::BodySource source = [&](char* buf, size_t size) -> Result<size_t> {
    size_t n = static_cast<size_t>(std::min<uint64_t>(size & ~size_t{7}, kSize - produced));
    gen.Fill(buf, n);
    sent_hash.Update(std::string_view(buf, n));
    produced += n;
    return n;
  };
  auto start = std::chrono::steady_clock::now();
  auto info = client::Upload(api, "/v1", remote, source, kSize);
  REQUIRE(info);
  CHECK(info->size == kSize);
  auto uploaded = std::chrono::steady_clock::now();

  testing::Sha256 got_hash;
  uint64_t received = 0;
  REQUIRE(client::Download(api, "/v1", remote, [&](std::string_view data) -> Status {
    got_hash.Update(data);
    received += data.size();
    return {};
  }));
  auto downloaded = std::chrono::steady_clock::now();
  CHECK(received == kSize);
  CHECK(got_hash.Hex() == sent_hash.Hex());

  uint64_t peak = VmHwmKiB(agent.pid());
  auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  INFO(fmt::format("agent VmHWM {} KiB -> {} KiB; upload {:.1f} s, download {:.1f} s", baseline,
                   peak, secs(uploaded - start), secs(downloaded - uploaded)));
  CHECK(peak - baseline < kMaxGrowthKiB);
  WARN(fmt::format("agent VmHWM {} KiB -> {} KiB; upload {:.1f} s, download {:.1f} s", baseline,
                   peak, secs(uploaded - start), secs(downloaded - uploaded)));
}
