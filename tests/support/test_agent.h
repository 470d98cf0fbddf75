// The real berth-agent, in-process, listening on a unix socket in a temp dir and on TCP
// 127.0.0.1:0, with its I/O thread running. Tests drive it through the real client library.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "common/client/api_client.h"
#include "guest-agent/agent.h"
#include "tests/support/temp_dir.h"

namespace berth::testing {

class TestAgent {
 public:
  // `customize` may change options before the agent starts (limits, default user...).
  explicit TestAgent(const std::function<void(agent::AgentOptions&)>& customize = {});
  ~TestAgent();

  client::ApiClient Client() const { return client::ApiClient(unix_endpoint_, token_); }
  client::ApiClient TcpClient() const { return client::ApiClient(tcp_endpoint_, token_); }
  client::ApiClient ClientWithToken(const std::string& token) const {
    return client::ApiClient(unix_endpoint_, token);
  }

  const Endpoint& unix_endpoint() const { return unix_endpoint_; }
  const Endpoint& tcp_endpoint() const { return tcp_endpoint_; }
  const std::string& token() const { return token_; }
  const std::string& local_socket() const { return options_.local_socket; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  // Runs `fn` on the agent's I/O thread and waits for it.
  void RunOnAgentThread(const std::function<void(agent::Agent&)>& fn);

 private:
  TempDir dir_;
  agent::AgentOptions options_;
  std::string token_;
  boost::asio::io_context io_{1};
  std::unique_ptr<agent::Agent> agent_;
  Endpoint unix_endpoint_;
  Endpoint tcp_endpoint_;
  std::thread thread_;
};

// The name of the user the test runs as (the agent acts as this user by default).
std::string CurrentUserName();

}  // namespace berth::testing
