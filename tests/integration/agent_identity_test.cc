// POST /v1/identity on a real agent (in-process, on this host): a fork's new hostname,
// machine-id and SSH host keys land under the agent's identity root (a temp dir: nothing of the
// host changes), then the parent's token is refused and the new one works. Bad fields change
// nothing; an agent without an identity root refuses the call.
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/support/test_agent.h"

using namespace berth;
using berth::http::bhttp::verb;
namespace fs = std::filesystem;

namespace {

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

void Write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

const std::string kNewToken = "fork-token-0123456789abcdef0123456789";

}  // namespace

TEST_CASE("identity: a fork's hostname, machine-id and SSH host keys are applied, then only its new token works; "
          "the parent's RSA key is gone at the answer and a new one follows",
          "[agent][identity]") {
  fs::path root;
  testing::TestAgent agent([&root](agent::AgentOptions& o) {
    root = fs::path(o.workspace_dir) / "identity-root";
    o.identity_root = root;
  });
  fs::create_directories(root / "etc" / "ssh");
  Write(root / "etc" / "hostname", "parent\n");
  Write(root / "etc" / "hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tparent\n::1\tlocalhost\n");
  Write(root / "etc" / "machine-id", "0123456789abcdef0123456789abcdef\n");
  Write(root / "etc" / "ssh" / "ssh_host_ed25519_key", "the parent's private key");
  Write(root / "etc" / "ssh" / "ssh_host_ed25519_key.pub", "the parent's public key");
  Write(root / "etc" / "ssh" / "ssh_host_ecdsa_key", "the parent's ECDSA key");
  Write(root / "etc" / "ssh" / "ssh_host_ecdsa_key.pub", "the parent's ECDSA public key");
  Write(root / "etc" / "ssh" / "ssh_host_rsa_key", "the parent's RSA key");
  Write(root / "etc" / "ssh" / "ssh_host_rsa_key.pub", "the parent's RSA public key");

  auto applied = agent.Client().Json(verb::post, "/v1/identity",
                                     nlohmann::json{{"token", kNewToken},
                                                    {"hostname", "fork-2"},
                                                    {"machine_id", "fedcba9876543210fedcba9876543210"},
                                                    {"mac", "52:54:00:00:00:02"},
                                                    {"regenerate_ssh_host_keys", true},
                                                    {"entropy", std::string(64, 'a')}});
  REQUIRE(applied);
  // Not the MAC nor the entropy: an agent whose root is not "/" changes no NIC, and no random
  // number generator, of the host.
  CHECK((*applied)["applied"] == nlohmann::json{"hostname", "machine_id", "ssh_host_keys", "token"});
  CHECK(Read(root / "etc" / "hostname") == "fork-2\n");
  CHECK(Read(root / "etc" / "hosts") == "127.0.0.1\tlocalhost\n127.0.1.1\tfork-2\n::1\tlocalhost\n");
  CHECK(Read(root / "etc" / "machine-id") == "fedcba9876543210fedcba9876543210\n");
  std::string key = Read(root / "etc" / "ssh" / "ssh_host_ed25519_key");
  CHECK(key.find("BEGIN OPENSSH PRIVATE KEY") != std::string::npos);
  CHECK(Read(root / "etc" / "ssh" / "ssh_host_ed25519_key.pub").starts_with("ssh-ed25519 "));
  CHECK(Read(root / "etc" / "ssh" / "ssh_host_ed25519_key.pub").ends_with(" root@fork-2\n"));
  CHECK(Read(root / "etc" / "ssh" / "ssh_host_ecdsa_key.pub").starts_with("ecdsa-sha2-nistp256 "));
  // The RSA key is made after the answer: the parent's was removed before it, and the new one
  // (the private key written before the public one) turns up.
  fs::path rsa = root / "etc" / "ssh" / "ssh_host_rsa_key";
  CHECK(Read(rsa).find("the parent's") == std::string::npos);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(rsa.string() + ".pub") && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(Read(rsa.string() + ".pub").starts_with("ssh-rsa "));
  CHECK(Read(rsa).find("BEGIN OPENSSH PRIVATE KEY") != std::string::npos);

  // The parent's token is refused from now on; the fork's works.
  auto old = agent.Client().Json(verb::get, "/v1/info");
  REQUIRE_FALSE(old);
  CHECK(old.error().code == ErrorCode::kUnauthenticated);
  auto info = agent.ClientWithToken(kNewToken).Json(verb::get, "/v1/info");
  REQUIRE(info);
  // And a second identity call needs the new token too.
  auto again = agent.Client().Json(verb::post, "/v1/identity", nlohmann::json{{"token", kNewToken + "x"}});
  REQUIRE_FALSE(again);
  CHECK(again.error().code == ErrorCode::kUnauthenticated);
}

TEST_CASE("identity: a bad field is refused by name and nothing is applied, the token included", "[agent][identity]") {
  fs::path root;
  testing::TestAgent agent([&root](agent::AgentOptions& o) {
    root = fs::path(o.workspace_dir) / "identity-root";
    o.identity_root = root;
  });
  fs::create_directories(root / "etc");
  Write(root / "etc" / "hostname", "parent\n");
  for (auto [body, named] : {std::pair{nlohmann::json{{"hostname", "fork"}}, "token"},
                             std::pair{nlohmann::json{{"token", "short"}}, "token"},
                             std::pair{nlohmann::json{{"token", kNewToken}, {"hostname", "Fork_2"}}, "hostname"},
                             std::pair{nlohmann::json{{"token", kNewToken}, {"hostname", "-x"}}, "hostname"},
                             std::pair{nlohmann::json{{"token", kNewToken}, {"machine_id", "abc"}}, "machine_id"},
                             std::pair{nlohmann::json{{"token", kNewToken}, {"machine_id", std::string(32, '0')}},
                                       "machine_id"},
                             std::pair{nlohmann::json{{"token", kNewToken}, {"mac", "53:54:00:00:00:02"}}, "mac"},
                             std::pair{nlohmann::json{{"token", kNewToken}, {"mac", "52-54-00-00-00-02"}}, "mac"},
                             std::pair{nlohmann::json{{"token", kNewToken}, {"entropy", "ab"}}, "entropy"},
                             std::pair{nlohmann::json{{"token", kNewToken}, {"entropy", std::string(64, 'G')}},
                                       "entropy"},
                             std::pair{nlohmann::json{{"token", kNewToken}, {"shell", "/bin/sh"}}, "shell"}}) {
    auto refused = agent.Client().Json(verb::post, "/v1/identity", body);
    INFO(body.dump());
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kInvalidArgument);
    CHECK(refused.error().message.find(named) != std::string::npos);
  }
  CHECK(Read(root / "etc" / "hostname") == "parent\n");
  CHECK(agent.Client().Json(verb::get, "/v1/info").has_value());
}

TEST_CASE("identity: an agent without an identity root refuses the call and keeps its token", "[agent][identity]") {
  testing::TestAgent agent;
  auto refused = agent.Client().Json(verb::post, "/v1/identity", nlohmann::json{{"token", kNewToken}});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kFailedPrecondition);
  CHECK(agent.Client().Json(verb::get, "/v1/info").has_value());
}
