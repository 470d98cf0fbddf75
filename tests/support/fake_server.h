// An http::Server on 127.0.0.1:0 with a handler the test writes: a stand-in peer (a hostile
// agent, a guest serving a tar) for tests of the client side.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "common/client/api_client.h"
#include "common/http/server.h"

namespace berth::testing {

// `handler` serves every request, on the server's own I/O thread.
class FakeServer {
 public:
  explicit FakeServer(http::Handler handler, http::ServerOptions options = {}) {
    server_ = std::make_unique<http::Server>(io_, options, std::move(handler));
    auto bound = server_->Listen(*Endpoint::Parse("tcp:127.0.0.1:0"));
    REQUIRE(bound);
    endpoint_ = *bound;
    thread_ = std::thread([this] {
      auto guard = boost::asio::make_work_guard(io_);
      io_.run();
    });
  }
  ~FakeServer() {
    server_->Stop();
    io_.stop();
    thread_.join();
  }
  client::ApiClient Client() const { return client::ApiClient(endpoint_, "token"); }
  const Endpoint& endpoint() const { return endpoint_; }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<http::Server> server_;
  Endpoint endpoint_;
  std::thread thread_;
};

// A 200 with `body` as it is. By reference: a std::string argument built inside the caller's
// co_await expression is the kind of temporary g++ 12 may destroy twice.
inline http::Task<void> SendText(http::Exchange& ex, std::string_view content_type,
                                 const std::string& body) {
  http::bhttp::response<http::bhttp::string_body> res{http::bhttp::status::ok, 11};
  res.set(http::bhttp::field::content_type, content_type);
  res.body() = body;
  co_await ex.Send(std::move(res));
}

}  // namespace berth::testing
