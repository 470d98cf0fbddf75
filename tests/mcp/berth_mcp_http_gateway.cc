// berth-mcp-http-gateway: a test-only HTTP server with nothing but /mcp (ServeMcpHttp) in
// front of a berthd given by --url. Lets the SDK test drive the streamable HTTP transport
// against the real berthd API while berthd itself does not mount /mcp.
#include <csignal>
#include <cstdio>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <CLI/CLI.hpp>

#include "common/http/server.h"
#include "mcp/mcp_http.h"

int main(int argc, char** argv) {
  using namespace berth;
  std::string url;
  std::string listen = "127.0.0.1:0";
  CLI::App app{"/mcp in front of a berthd (test-only)"};
  app.add_option("--url", url, "berthd's URL")->required();
  app.add_option("--listen", listen, "HOST:PORT to serve on");
  CLI11_PARSE(app, argc, argv);

  boost::asio::io_context io;
  boost::asio::thread_pool pool(4);
  mcp::McpHttpContext mcp(pool);
  if (auto status = mcp.SetApiUrl(url); !status) {
    std::fprintf(stderr, "bad --url: %s\n", status.error().message.c_str());
    return 2;
  }
  http::Handler handler = [&mcp](http::Exchange& ex) -> http::Task<void> {
    if (ex.path() == "/mcp") {
      co_await mcp::ServeMcpHttp(ex, mcp);
      co_return;
    }
    co_await ex.SendError(Error(ErrorCode::kNotFound, "only /mcp is served here"));
  };
  http::Server server(io, http::ServerOptions(), handler);
  auto endpoint = Endpoint::Parse("tcp:" + listen);
  if (!endpoint) {
    std::fprintf(stderr, "bad --listen: %s\n", endpoint.error().message.c_str());
    return 2;
  }
  auto bound = server.Listen(*endpoint);
  if (!bound) {
    std::fprintf(stderr, "listen: %s\n", bound.error().message.c_str());
    return 1;
  }
  std::printf("listening on http://%s:%u\n", bound->host.c_str(), static_cast<unsigned>(bound->port));
  std::fflush(stdout);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    server.Stop();
    io.stop();
  });
  io.run();
  pool.join();
  return 0;
}
