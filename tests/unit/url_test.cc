#include <catch2/catch.hpp>

#include "common/http/router.h"
#include "common/http/url.h"

using namespace berth::http;

TEST_CASE("percent decoding") {
  CHECK(PercentDecode("/a%20b/c").value() == "/a b/c");
  CHECK(PercentDecode("/a+b").value() == "/a+b");
  CHECK_FALSE(PercentDecode("/a%2"));
  CHECK_FALSE(PercentDecode("/a%zz"));
  CHECK_FALSE(PercentDecode("/a%00b"));
  CHECK(PercentEncode("a b/ü") == "a%20b/%C3%BC");
  CHECK(PercentDecode(PercentEncode("x y%z/ü")).value() == "x y%z/ü");
}

TEST_CASE("query strings") {
  auto q = Query::Parse("a=1&b=x+y&c=%2F&flag&n=42");
  REQUIRE(q);
  CHECK(q->Get("a") == "1");
  CHECK(q->Get("b") == "x y");
  CHECK(q->Get("c") == "/");
  CHECK(q->GetBool("flag", false).value());
  CHECK_FALSE(q->GetBool("missing", false).value());
  CHECK(q->GetInt("n", 0, 0, 100).value() == 42);
  CHECK_FALSE(q->GetInt("n", 0, 0, 10));
  CHECK(q->GetInt("a", 0, 0, 10).value() == 1);
  CHECK_FALSE(Query::Parse("a=%G1"));
}
