#include "tests/support/test_agent.h"

#include <pwd.h>
#include <unistd.h>

#include <future>
#include <random>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

namespace berth::testing {

std::string CurrentUserName() {
  passwd* pw = getpwuid(geteuid());
  return pw != nullptr ? pw->pw_name : "root";
}

TestAgent::TestAgent(const std::function<void(agent::AgentOptions&)>& customize)
    : dir_("berth-agent") {
  std::random_device rd;
  token_ = fmt::format("{:016x}{:016x}", (uint64_t{rd()} << 32) | rd(), (uint64_t{rd()} << 32) | rd());
  options_.token = token_;
  options_.default_user = CurrentUserName();
  options_.local_socket = dir_ / "local.sock";
  options_.workspace_dir = dir_.path().string();
  options_.listen.push_back(*Endpoint::Parse("unix:" + (dir_ / "agent.sock")));
  options_.listen.push_back(*Endpoint::Parse("tcp:127.0.0.1:0"));
  if (customize) customize(options_);
  agent_ = std::make_unique<agent::Agent>(io_, options_);
  auto bound = agent_->Start();
  if (!bound) throw std::runtime_error("agent start: " + bound.error().message);
  for (const auto& ep : *bound) {
    if (ep.kind == Endpoint::Kind::kUnix) unix_endpoint_ = ep;
    if (ep.kind == Endpoint::Kind::kTcp) tcp_endpoint_ = ep;
  }
  thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(io_);
    io_.run();
  });
}

TestAgent::~TestAgent() {
  RunOnAgentThread([](agent::Agent& agent) { agent.Stop(); });
  io_.stop();
  thread_.join();
  agent_.reset();
}

void TestAgent::RunOnAgentThread(const std::function<void(agent::Agent&)>& fn) {
  std::promise<void> done;
  boost::asio::post(io_, [&] {
    fn(*agent_);
    done.set_value();
  });
  done.get_future().wait();
}

}  // namespace berth::testing
