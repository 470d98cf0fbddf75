// berthd in-process for integration tests: port 0 on loopback, a temp data directory, libvirt's
// test driver (no guests run), and the unix transport, so each workspace gets a real
// berth-agent as a host process and the whole API works end to end in seconds. The guest
// image is a stand-in: a small real qcow2 (overlays are made on it) and empty kernel files.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "common/client/api_client.h"
#include "controller/berthd.h"
#include "tests/support/temp_dir.h"

namespace berth::testing {

class TestBerthd {
 public:
  // `customize` may change the config before start (idle poll, boot timeout...).
  explicit TestBerthd(const std::function<void(Config&)>& customize = {});
  ~TestBerthd();

  client::ApiClient Admin() const { return client::ApiClient(daemon_->endpoint(), admin_key_); }
  client::ApiClient WithKey(const std::string& key) const {
    return client::ApiClient(daemon_->endpoint(), key);
  }
  const std::string& admin_key() const { return admin_key_; }
  Daemon& daemon() { return *daemon_; }
  const std::filesystem::path& data_dir() const { return dir_.path(); }
  // Stops and starts the daemon on the same data directory (a berthd restart).
  void Restart();

 private:
  TempDir dir_;
  Config config_;
  std::unique_ptr<Daemon> daemon_;
  std::string admin_key_;
};

// Creates a stand-in image "base" under `images_dir` (qemu-img must be installed).
void MakeFakeImage(const std::filesystem::path& images_dir, const std::string& name = "base");

// The agent binary the unix transport runs (from $BERTH_AGENT_BIN, set by CMake).
std::string AgentBinary();

}  // namespace berth::testing
