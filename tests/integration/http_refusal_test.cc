// An answer given without reading the request body (a refused key, a body over its limit)
// must reach the client whole: closing a socket with the client's bytes unread resets the
// connection, and the reset drops what of the answer the kernel had not sent yet. The server
// drains briefly before it closes (a lingering close).
#include <catch2/catch.hpp>

#include "tests/support/fake_server.h"

using namespace berth;
using berth::http::bhttp::verb;

TEST_CASE("an answer sent before the request body is read reaches the client whole",
          "[http][refusal]") {
  const std::string answer(512 * 1024, 'a');
  testing::FakeServer server([&answer](http::Exchange& ex) -> http::Task<void> {
    co_await testing::SendText(ex, "text/plain", answer);  // the body is never read
  });
  const std::string body(1 << 20, 'b');
  for (int i = 0; i < 20; ++i) {
    auto api = server.Client();
    auto got = api.Request(verb::post, "/anything", body, "application/octet-stream");
    INFO("round " << i);
    REQUIRE(got);
    CHECK(got->status == 200);
    CHECK(got->body.size() == answer.size());
  }
}
