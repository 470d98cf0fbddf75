// common/json.h: parsing with bounded depth (refused while parsing, without recursion, fast),
// dumping that replaces invalid UTF-8 instead of throwing, and typed reads of body fields.
#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "common/client/api_client.h"
#include "common/json.h"

using namespace berth;
using nlohmann::json;

namespace {

std::string Nested(size_t depth, std::string_view open = "[", std::string_view close = "]",
                   std::string_view inner = "1") {
  std::string out;
  for (size_t i = 0; i < depth; ++i) out += open;
  out += inner;
  for (size_t i = 0; i < depth; ++i) out += close;
  return out;
}

// Runs `fn` on a thread with a 128 KiB stack: a parser that recursed once per level of 100k
// levels (a few MB of frames) would overflow it and crash the test.
template <class F>
void OnSmallStack(F fn) {
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, 128 * 1024) == 0);
  pthread_t thread;
  auto trampoline = [](void* arg) -> void* {
    (*static_cast<F*>(arg))();
    return nullptr;
  };
  REQUIRE(pthread_create(&thread, &attr, trampoline, &fn) == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
  pthread_attr_destroy(&attr);
}

}  // namespace

TEST_CASE("ParseJson accepts nesting up to the limit and refuses one level more", "[json]") {
  auto at_limit = ParseJson(Nested(kMaxJsonDepth));
  REQUIRE(at_limit.has_value());
  CHECK(DumpJson(*at_limit) == Nested(kMaxJsonDepth));

  auto over = ParseJson(Nested(kMaxJsonDepth + 1));
  REQUIRE_FALSE(over.has_value());
  CHECK(over.error().code == ErrorCode::kInvalidArgument);
  CHECK(over.error().message == "JSON nested deeper than 64 levels");

  // Objects count as arrays do, mixed or not.
  auto objects = ParseJson(Nested(kMaxJsonDepth + 1, R"({"a":)", "}"));
  REQUIRE_FALSE(objects.has_value());
  CHECK(objects.error().message == "JSON nested deeper than 64 levels");
  CHECK(ParseJson(Nested(kMaxJsonDepth, R"({"a":[)", "]}"), /*max_depth=*/2 * kMaxJsonDepth)
            .has_value());
  CHECK_FALSE(ParseJson(Nested(kMaxJsonDepth, R"({"a":[)", "]}")).has_value());
}

TEST_CASE("200 KB of '[' is refused fast and without deep recursion", "[json]") {
  std::string brackets(200 * 1024, '[');
  std::string objects = Nested(40 * 1024, R"({"k":)", "}");
  std::optional<Result<json>> a, b;
  std::chrono::steady_clock::duration took{};
  OnSmallStack([&] {
    auto start = std::chrono::steady_clock::now();
    a = ParseJson(brackets);
    b = ParseJson(objects);
    took = std::chrono::steady_clock::now() - start;
  });
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK_FALSE(a->has_value());
  CHECK(a->error().message == "JSON nested deeper than 64 levels");
  CHECK_FALSE(b->has_value());
  CHECK(b->error().message == "JSON nested deeper than 64 levels");
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  std::fprintf(stderr, "ParseJson refused 200 KB of '[' and 240 KB of nested objects in %lld us\n",
               static_cast<long long>(us));
  // It stops at level 65, so the size of the rest does not matter: well under a millisecond
  // on an idle machine; the bound only catches a parser that reads (or builds) it all.
  CHECK(us < 200'000);
}

TEST_CASE("ParseJson: values, errors and what it does not accept", "[json]") {
  auto value = ParseJson(R"({"a": [1, -2, 3.5, "x", true, null, {"b": {}}], "a2": 18446744073709551615})");
  REQUIRE(value.has_value());
  CHECK((*value)["a"][0] == 1);
  CHECK((*value)["a"][1] == -2);
  CHECK((*value)["a"][2] == 3.5);
  CHECK((*value)["a"][3] == "x");
  CHECK((*value)["a"][4] == true);
  CHECK((*value)["a"][5].is_null());
  CHECK((*value)["a"][6]["b"].is_object());
  CHECK((*value)["a2"].get<uint64_t>() == UINT64_MAX);
  // A repeated key keeps the last value, as nlohmann's own parser does.
  CHECK(ParseJson(R"({"k":1,"k":2})").value()["k"] == 2);
  CHECK(ParseJson(" 7 ").value() == 7);

  for (std::string_view bad : {"", "{", "[1,]", "{\"a\" 1}", "nul", "1 2", "[1]x", "\"\xff\""}) {
    auto r = ParseJson(bad);
    INFO(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK(r.error().message.starts_with("invalid JSON: parse error at"));
  }
}

TEST_CASE("DumpJson replaces invalid UTF-8 instead of throwing", "[json]") {
  json j = {{"line", std::string("boot \xff\xfe ok")}, {"ascii", "é"}};
  CHECK_THROWS(j.dump());  // nlohmann's default, which would end an event stream
  CHECK(DumpJson(j) == "{\"ascii\":\"é\",\"line\":\"boot \xef\xbf\xbd\xef\xbf\xbd ok\"}");
  CHECK(DumpJson(j, -1, /*ensure_ascii=*/true) ==
        R"({"ascii":"\u00e9","line":"boot \ufffd\ufffd ok"})");
  CHECK(DumpJson(json{{"a", 1}}, 2) == "{\n  \"a\": 1\n}");
}

TEST_CASE("typed field reads name the field instead of throwing", "[json]") {
  json body = {{"name", 5}, {"tenant", "t_a"}, {"force", "yes"}, {"n", 3}, {"big", UINT64_MAX},
               {"none", nullptr}};
  auto name = OptionalString(body, "name");
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().code == ErrorCode::kInvalidArgument);
  CHECK(name.error().message == "'name' must be a string");
  CHECK(OptionalString(body, "tenant").value() == "t_a");
  CHECK_FALSE(OptionalString(body, "missing").value().has_value());
  CHECK_FALSE(OptionalString(body, "none").value().has_value());
  CHECK(OptionalBool(body, "force").error().message == "'force' must be true or false");
  CHECK(OptionalInt(body, "n").value() == 3);
  CHECK(OptionalInt(body, "big").error().message == "'big' must be an integer");
  CHECK(OptionalInt(body, "tenant").error().message == "'tenant' must be an integer");
}

TEST_CASE("the client library refuses a hostile peer's deep JSON with an error", "[json][client]") {
  std::string deep(200 * 1024, '[');
  // An error body (any non-2xx answer goes through ErrorFrom).
  client::Response response;
  response.status = 500;
  response.body = deep;
  Error error = client::ApiClient::ErrorFrom(response);
  CHECK(error.code == ErrorCode::kInternal);
  CHECK(error.message.starts_with("HTTP 500: [[[["));
  // A stream of NDJSON events (exec, events, watch).
  int lines = 0;
  client::NdjsonSplitter splitter([&](const json&) -> Status {
    ++lines;
    return {};
  });
  REQUIRE(splitter.Feed("{\"type\":\"keepalive\"}\n"));
  auto status = splitter.Feed(deep + "\n");
  REQUIRE_FALSE(status.has_value());
  CHECK(status.error().message == "invalid NDJSON line: JSON nested deeper than 64 levels");
  CHECK(lines == 1);
}
