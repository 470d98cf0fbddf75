// berthd's /mcp checks the key before it reads a byte of the body: any "Bearer x" used to get
// 32 MiB read and parsed (four such requests took berthd to 1.3 GB).
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/integration/berthd_hardening_util.h"
#include "tests/support/raw_http.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using testing::HardeningBerthd;
using testing::MintKey;
using testing::StatusOf;

}  // namespace

TEST_CASE("berthd /mcp: an unauthenticated 32 MiB POST is refused before its body is read",
          "[berthd][mcp]") {
  auto& d = HardeningBerthd();
  uint16_t port = d.daemon().endpoint().port;
  auto head = [](std::string_view auth, uint64_t length) {
    return fmt::format("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Type: application/json\r\n"
                       "Content-Length: {}\r\n\r\n",
                       auth, length);
  };
  constexpr uint64_t k32MiB = 32u << 20;
  // The answer comes with not a byte of the body sent: berthd did not wait for it.
  for (std::string_view auth : {"", "Authorization: Bearer x\r\n", "Authorization: Bearer bk_0000\r\n"}) {
    testing::RawConnection c(port);
    REQUIRE(c.ok());
    REQUIRE(c.Send(head(auth, k32MiB)));
    std::string answer = c.ReadHead(std::chrono::seconds(10));
    INFO(auth);
    CHECK(answer.starts_with("HTTP/1.1 401 "));
    CHECK(answer.find("WWW-Authenticate: Bearer\r\n") != std::string::npos);
  }
  // A good key without a session gets no further than an initialize's 64 KiB.
  {
    testing::RawConnection c(port);
    REQUIRE(c.Send(head("Authorization: Bearer " + d.admin_key() + "\r\n", k32MiB)));
    CHECK(c.ReadHead(std::chrono::seconds(10)).starts_with("HTTP/1.1 413 "));
  }
  // Four clients that send their 32 MiB anyway: none of it is held (peak RSS stays flat).
  REQUIRE(testing::ResetPeakRss());
  uint64_t before = testing::StatusKiB("VmHWM");
  std::vector<std::thread> senders;
  std::string chunk(1 << 20, 'x');
  for (int i = 0; i < 4; ++i) {
    senders.emplace_back([&] {
      testing::RawConnection c(port);
      if (!c.Send(head("Authorization: Bearer x\r\n", k32MiB))) return;
      for (int mib = 0; mib < 32 && c.Send(chunk); ++mib) {
      }
    });
  }
  for (auto& t : senders) t.join();
  uint64_t grown = testing::StatusKiB("VmHWM") - before;
  INFO("peak RSS grew by " << grown << " KiB");
  CHECK(grown < 24 * 1024);
  CHECK(d.Admin().Json(verb::get, "/v1/me"));
}

}  // namespace berth
