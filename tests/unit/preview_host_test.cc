// Preview hosts are parsed once, strictly: what the Host names is what is authorised and
// forwarded (controller/preview/preview_host.h).
#include <catch2/catch.hpp>

#include "controller/preview/preview_config.h"
#include "controller/preview/preview_host.h"

namespace berth::preview {
namespace {

constexpr std::string_view kDomain = "preview.localhost";

}  // namespace

TEST_CASE("preview host: {port}-{workspace} under the domain names that port and workspace", "[preview]") {
  auto a = ParsePreviewHost("5173-myapp.preview.localhost:8420", kDomain);
  REQUIRE(a);
  REQUIRE(a->has_value());
  CHECK(**a == PreviewAddress{5173, "myapp"});
  auto b = ParsePreviewHost("3000-ws_0123456789abcdef.preview.localhost", kDomain);
  REQUIRE(b);
  REQUIRE(b->has_value());
  CHECK(**b == PreviewAddress{3000, "ws_0123456789abcdef"});
  // Names compare case-insensitively: the workspace is looked up lowercase.
  auto c = ParsePreviewHost("8080-My-App.PREVIEW.Localhost", kDomain);
  REQUIRE(c);
  REQUIRE(c->has_value());
  CHECK(**c == PreviewAddress{8080, "my-app"});
  auto d = ParsePreviewHost("1-a.preview.localhost", kDomain);
  REQUIRE((d && d->has_value()));
  CHECK((*d)->port == 1);
  auto e = ParsePreviewHost("65535-a.preview.localhost", kDomain);
  REQUIRE((e && e->has_value()));
  CHECK((*e)->port == 65535);
}

TEST_CASE("preview host: a strict port is 1-65535 in plain decimal, nothing else", "[preview]") {
  CHECK(ParseStrictPort("1") == 1);
  CHECK(ParseStrictPort("65535") == 65535);
  CHECK(ParseStrictPort("8080") == 8080);
  for (std::string_view bad : {"", "0", "080", "65536", "99999", "123456", "+80", "-1", " 80", "80 ", "8o"}) {
    INFO(bad);
    CHECK_FALSE(ParseStrictPort(bad));
  }
}

TEST_CASE("preview host: a host outside the domain is the API's, not a preview", "[preview]") {
  for (std::string_view host : {"127.0.0.1:8420", "localhost:8420", "", "[::1]:8420", "berth.example.com",
                                "preview.localhost.evil.com", "xpreview.localhost", "5173-a.preview.localhostx"}) {
    INFO(host);
    auto r = ParsePreviewHost(host, kDomain);
    REQUIRE(r);
    CHECK_FALSE(r->has_value());
  }
}

TEST_CASE("preview host: hostile forms under the domain are refused, never normalised", "[preview]") {
  for (std::string_view host : {
           "0080-a.preview.localhost",        // leading zero
           "+80-a.preview.localhost",         // sign
           "80 -a.preview.localhost",         // space
           " 80-a.preview.localhost",         // leading space
           "0-a.preview.localhost",           // port 0
           "65536-a.preview.localhost",       // out of range
           "123456-a.preview.localhost",      // too many digits
           "99999999999999999999-a.preview.localhost",
           "80-a.preview.localhost.",         // trailing dot
           "80-a.preview.localhost.:8420",
           "x.80-a.preview.localhost",        // a second label
           "80.a.preview.localhost",
           "-a.preview.localhost",            // no port
           "80-.preview.localhost",           // no workspace
           "80-a_b.preview.localhost",        // '_' outside an id
           "80-ws_xyz.preview.localhost",     // not an id's hex
           "80--a.preview.localhost",         // a name starting with '-'
           "80-a-.preview.localhost",
           "80-a%2eb.preview.localhost",
           "preview.localhost",               // the domain itself
           ".preview.localhost",
           "80-a.preview.localhost:x80",      // a port that is no number
           "80-a.preview.localhost:",
       }) {
    INFO(host);
    auto r = ParsePreviewHost(host, kDomain);
    CHECK_FALSE(r);
    if (!r) CHECK(r.error().code == ErrorCode::kInvalidArgument);
  }
  std::string huge = "80-" + std::string(61, 'a') + ".preview.localhost";  // a 64-character label
  CHECK_FALSE(ParsePreviewHost(huge, kDomain));
  std::string longest = "80-" + std::string(60, 'a') + ".preview.localhost";
  CHECK(ParsePreviewHost(longest, kDomain));
}

TEST_CASE("preview host: every name berthd accepts has a label for every port", "[preview]") {
  std::string name(kMaxPreviewableName, 'a');
  auto label = PreviewLabel(65535, name);
  REQUIRE(label);
  CHECK(label->size() == 63);
  CHECK_FALSE(PreviewLabel(65535, name + "a"));
  CHECK_FALSE(PreviewLabel(0, "a"));
}

TEST_CASE("preview config: the domain and durations are checked", "[preview]") {
  CHECK(ParsePreviewConfig(nlohmann::json::parse(R"({"domain":"preview.example.com","default_ttl":"2h"})")));
  CHECK_FALSE(ParsePreviewConfig(nlohmann::json::parse(R"({"domain":"Preview.Example.com"})")));
  CHECK_FALSE(ParsePreviewConfig(nlohmann::json::parse(R"({"domain":".example.com"})")));
  CHECK_FALSE(ParsePreviewConfig(nlohmann::json::parse(R"({"domain":"a..b"})")));
  CHECK_FALSE(ParsePreviewConfig(nlohmann::json::parse(R"({"scheme":"ftp"})")));
  CHECK_FALSE(ParsePreviewConfig(nlohmann::json::parse(R"({"default_ttl":"40d"})")));  // over max_ttl
  CHECK_FALSE(ParsePreviewConfig(nlohmann::json::parse(R"({"colour":"blue"})")));
}

TEST_CASE("preview config: TLS takes a certificate and its key together, on a listener of its own",
          "[preview]") {
  auto message = [](const char* text) {
    auto c = ParsePreviewConfig(nlohmann::json::parse(text));
    REQUIRE_FALSE(c);
    CHECK(c.error().code == ErrorCode::kInvalidArgument);
    return c.error().message;
  };
  // One without the other, each error naming the key that is missing.
  CHECK_THAT(message(R"({"listen":"127.0.0.1:8443","tls_cert":"/c.pem"})"), Catch::Contains("'preview.tls_key'"));
  CHECK_THAT(message(R"({"listen":"127.0.0.1:8443","tls_key":"/k.pem"})"), Catch::Contains("'preview.tls_cert'"));
  // TLS is the preview listener's: without one, refused, naming it.
  CHECK_THAT(message(R"({"tls_cert":"/c.pem","tls_key":"/k.pem"})"), Catch::Contains("'preview.listen'"));
  // Paths are non-empty strings.
  CHECK_THAT(message(R"({"listen":"127.0.0.1:8443","tls_cert":"","tls_key":"/k.pem"})"),
             Catch::Contains("'preview.tls_cert'"));
  CHECK_THAT(message(R"({"listen":"127.0.0.1:8443","tls_cert":"/c.pem","tls_key":7})"),
             Catch::Contains("'preview.tls_key'"));

  // With TLS, links say https unless the operator says otherwise (a TLS proxy in front that
  // forwards plain http is still a scheme of "https"; "http" is taken at its word).
  auto tls = ParsePreviewConfig(
      nlohmann::json::parse(R"({"listen":"127.0.0.1:8443","tls_cert":"/c.pem","tls_key":"/k.pem"})"));
  REQUIRE(tls);
  CHECK(tls->tls());
  CHECK(tls->LinkScheme() == "https");
  CHECK_FALSE(tls->https());  // requests are https by their own connection, not by the config
  auto said = ParsePreviewConfig(nlohmann::json::parse(
      R"({"listen":"127.0.0.1:8443","tls_cert":"/c.pem","tls_key":"/k.pem","scheme":"http","url_port":8443})"));
  REQUIRE(said);
  CHECK(said->LinkScheme() == "http");
  CHECK(said->url_port == 8443);
  // Without TLS: http, unless a proxy in front is declared.
  auto plain = ParsePreviewConfig(nlohmann::json::parse(R"({})"));
  REQUIRE(plain);
  CHECK_FALSE(plain->tls());
  CHECK(plain->LinkScheme() == "http");
  auto proxied = ParsePreviewConfig(nlohmann::json::parse(R"({"scheme":"https","url_port":443})"));
  REQUIRE(proxied);
  CHECK(proxied->LinkScheme() == "https");
  CHECK(proxied->https());
  // A config built in code meets the same rules.
  PreviewConfig built;
  built.tls_cert = "/c.pem";
  built.tls_key = "/k.pem";
  CHECK_FALSE(CheckPreviewConfig(built));
  built.listen = "127.0.0.1:0";
  CHECK(CheckPreviewConfig(built));
}

}  // namespace berth::preview
