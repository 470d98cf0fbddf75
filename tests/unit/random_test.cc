#include <set>

#include <catch2/catch.hpp>

#include "common/random.h"

TEST_CASE("ids and secrets are random, well-formed and distinct") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto id = berth::NewId("ws");
    REQUIRE(id.size() == 3 + 16);
    REQUIRE(id.starts_with("ws_"));
    REQUIRE(seen.insert(id).second);
  }
  CHECK(berth::RandomHex(32).size() == 64);
  auto uuid = berth::NewUuid();
  REQUIRE(uuid.size() == 36);
  CHECK(uuid[14] == '4');
  CHECK(std::string("89ab").find(uuid[19]) != std::string::npos);
  CHECK(berth::Sha256Hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
