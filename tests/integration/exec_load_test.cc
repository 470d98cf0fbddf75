// Many concurrent NDJSON exec streams with a lot of output each: every byte arrives, in order
// (checked by SHA-256 against the guest's own), and the agent stays healthy.
#include <openssl/evp.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "common/client/exec.h"
#include "tests/support/test_agent.h"

using namespace berth;
using protocol::ExecEvent;

namespace {

constexpr int kStreams = 50;
constexpr uint64_t kBytesPerStream = 20u << 20;

// Incremental SHA-256 through OpenSSL's EVP interface.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void Update(std::string_view data) { EVP_DigestUpdate(ctx_.get(), data.data(), data.size()); }
  std::string HexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &len);
    std::string out;
    for (unsigned int i = 0; i < len; ++i) out += fmt::format("{:02x}", digest[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

}  // namespace

TEST_CASE("50 concurrent exec streams of 20 MiB each arrive whole", "[exec][load]") {
  testing::TestAgent agent;
  // Deterministic output, so the guest can hash the same bytes on its own.
  std::string generator = fmt::format("yes abcdefghij | head -c {}", kBytesPerStream);
  protocol::ExecRequest hash_req;
  hash_req.cmd = generator + " | sha256sum";
  auto client = agent.Client();
  auto guest_hash = client::Exec(client, "/v1", hash_req);
  REQUIRE(guest_hash);
  std::string expected = guest_hash->stdout_data.substr(0, 64);
  REQUIRE(expected.size() == 64);

  std::atomic<int> ok{0};
  std::vector<std::string> failures(kStreams);
  auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      auto own = agent.Client();
      protocol::ExecRequest req;
      req.cmd = generator;
      Sha256 sha;
      uint64_t bytes = 0;
      uint64_t next_offset = 0;
      bool in_order = true;
      auto end = client::ExecStream(own, "/v1", req, [&](const ExecEvent& e) -> Status {
        if (e.type == ExecEvent::Type::kStdout) {
          in_order = in_order && e.offset == next_offset;
          next_offset += e.data.size();
          sha.Update(e.data);
          bytes += e.data.size();
        }
        return {};
      });
      std::string digest = sha.HexDigest();
      if (!end) {
        failures[i] = end.error().message;
      } else if (end->exit_code != 0 || bytes != kBytesPerStream || !in_order ||
                 digest != expected) {
        failures[i] = fmt::format("exit {} bytes {} in order {} hash {}", end->exit_code.value_or(-1),
                                  bytes, in_order, digest);
      } else {
        ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  WARN(fmt::format("{} streams x {} MiB in {} ms", kStreams, kBytesPerStream >> 20, took.count()));
  for (int i = 0; i < kStreams; ++i) {
    INFO("stream " << i << ": " << failures[i]);
    CHECK(failures[i].empty());
  }
  CHECK(ok == kStreams);

  auto health = client.Json(http::bhttp::verb::get, "/v1/health");
  REQUIRE(health);
  CHECK((*health)["status"] == "ok");
  auto after = client::Exec(client, "/v1", hash_req);
  REQUIRE(after);
  CHECK(after->stdout_data.substr(0, 64) == expected);
}
