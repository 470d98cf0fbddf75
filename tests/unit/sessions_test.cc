// The pure parts of the web UI's sessions (controller/api/sessions.h).
#include <catch2/catch.hpp>

#include "controller/api/sessions.h"

namespace berth::api {

TEST_CASE("sessions: the cookie is found among others, whatever its place and spacing", "[sessions]") {
  CHECK(CookieValue("berth_session=bs_1", "berth_session") == "bs_1");
  CHECK(CookieValue("a=1; berth_session=bs_2; b=3", "berth_session") == "bs_2");
  CHECK(CookieValue("a=1;berth_session=\"bs_3\"", "berth_session") == "bs_3");
  CHECK(CookieValue("xberth_session=no; berth_session_x=no", "berth_session") == std::nullopt);
  CHECK(CookieValue("", "berth_session") == std::nullopt);
  CHECK(CookieValue("berth_session", "berth_session") == std::nullopt);
  CHECK(CookieValue(" ; ;berth_session= bs_4 ", "berth_session") == "bs_4");
}

TEST_CASE("sessions: Set-Cookie is HttpOnly and SameSite=Strict, Secure over TLS only", "[sessions]") {
  CHECK(SessionCookie("bs_x", 60, false) == "berth_session=bs_x; Path=/; Max-Age=60; HttpOnly; SameSite=Strict");
  CHECK(SessionCookie("bs_x", 60, true).ends_with("; SameSite=Strict; Secure"));
  CHECK(SessionCookie("bs_x", -5, false).find("Max-Age=0;") != std::string::npos);
  CHECK(ClearedSessionCookie(false) == "berth_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict");
}

TEST_CASE("sessions: only berthd's own host is the same origin; a preview host is not", "[sessions]") {
  CHECK(SameOrigin("http://127.0.0.1:8420", "127.0.0.1:8420"));
  CHECK(SameOrigin("https://Berth.Example.com", "berth.example.com"));
  CHECK_FALSE(SameOrigin("http://3000-demo.preview.localhost:8420", "localhost:8420"));
  CHECK_FALSE(SameOrigin("http://localhost:8421", "localhost:8420"));
  CHECK_FALSE(SameOrigin("null", "localhost:8420"));
  CHECK_FALSE(SameOrigin("", "localhost:8420"));
  CHECK_FALSE(SameOrigin("http://localhost:8420", ""));
  CHECK_FALSE(SameOrigin("http://localhost:8420.evil.example", "localhost:8420"));
}

TEST_CASE("sessions: the CSRF token is the session's own, and not its secret", "[sessions]") {
  std::string a = "bs_" + std::string(64, 'a');
  std::string b = "bs_" + std::string(64, 'b');
  auto token = Sessions::CsrfToken(a);
  CHECK(token.find(a.substr(3, 8)) == std::string::npos);
  CHECK(Sessions::CsrfMatches(a, token));
  CHECK_FALSE(Sessions::CsrfMatches(b, token));
  CHECK_FALSE(Sessions::CsrfMatches(a, ""));
  CHECK_FALSE(Sessions::CsrfMatches(a, token.substr(1)));
}

TEST_CASE("sessions: the config takes the two timeouts in range and nothing else", "[sessions]") {
  auto ok = ParseSessionOptions({{"idle_timeout_s", 600}, {"max_age_s", 86400}});
  REQUIRE(ok);
  CHECK(ok->idle_timeout == std::chrono::seconds(600));
  CHECK(ok->max_age == std::chrono::seconds(86400));
  CHECK_FALSE(ParseSessionOptions({{"idle_timeout_s", 5}}));
  CHECK_FALSE(ParseSessionOptions({{"max_age_s", "1d"}}));
  CHECK_FALSE(ParseSessionOptions({{"cookie", "x"}}));
  CHECK_FALSE(ParseSessionOptions(nlohmann::json::array()));
}

}  // namespace berth::api
