// berthd's own TLS on the preview listener (issue 13; common/http/tls_front.h), end to end
// without a VM: berthd in-process on the unix transport (host agents), an "app" on the host's
// loopback, and a wildcard certificate for *.preview.test signed by a CA made at test time
// (tests/support/test_tls.h). Clients are blocking OpenSSL clients on raw sockets, so each test
// says exactly what a client sends, from which address, and sees what the server presented.
#include <catch2/catch.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <fmt/format.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "cli/app.h"
#include "common/json.h"
#include "tests/support/fake_server.h"
#include "tests/support/raw_http.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_berthd.h"
#include "tests/support/test_tls.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using http::bhttp::verb;
using nlohmann::json;
using namespace std::chrono_literals;
using testing::RawConnection;
using testing::TestBerthd;
using testing::TlsClient;
using testing::WaitFor;

constexpr auto kHandshakeDeadline = 1500ms;
constexpr size_t kPerSource = 4;

// --- the app: what it saw of each request, and a WebSocket echo --------------------------------

json HeadersOf(const http::Exchange& ex) {
  json h = json::object();
  for (const auto& f : ex.request()) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    h[name] = std::string(f.value());
  }
  return h;
}

struct AppLog {
  std::mutex mutex;
  json last;
};
AppLog& Log() {
  static AppLog log;
  return log;
}

http::Task<void> App(http::Exchange& ex) {
  json seen = {{"target", std::string(ex.target())}, {"headers", HeadersOf(ex)}};
  {
    std::lock_guard lock(Log().mutex);
    Log().last = seen;
  }
  if (ex.path() == "/ws" && ex.IsWebSocketUpgrade()) {
    auto ws = co_await ex.AcceptWebSocket();
    if (!ws) co_return;
    (*ws)->text(true);
    std::string hello = "connected";
    auto [hec, hn] = co_await (*ws)->async_write(boost::asio::buffer(hello),
                                                  boost::asio::as_tuple(boost::asio::use_awaitable));
    if (hec) co_return;
    for (;;) {
      boost::beast::flat_buffer buffer;
      auto [ec, n] = co_await (*ws)->async_read(buffer, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (ec) co_return;
      (*ws)->text(true);
      auto [wec, wn] = co_await (*ws)->async_write(buffer.data(), boost::asio::as_tuple(boost::asio::use_awaitable));
      if (wec) co_return;
    }
  }
  std::string body = DumpJson(seen);
  co_await testing::SendText(ex, "application/json", body);
}

testing::FakeServer& TheApp() {
  static testing::FakeServer app(App);
  return app;
}
uint16_t AppPort() { return TheApp().endpoint().port; }

// --- the certificate and berthd --------------------------------------------------------------------

struct Files {
  testing::TempDir dir{"preview-tls"};
  testing::TestCa ca;
  fs::path ca_file = dir.path() / "ca.pem";
  fs::path cert = dir.path() / "preview.pem";
  fs::path key = dir.path() / "preview.key";
  Files() {
    ca.WriteCert(ca_file);
    ca.Issue("*.preview.test", "DNS:*.preview.test", 100, cert, key);
  }
};
Files& Tls() {
  static Files files;
  return files;
}

void UseTls(Config& c, const fs::path& cert, const fs::path& key) {
  c.preview.domain = "preview.test";
  c.preview.listen = "127.0.0.1:0";
  c.preview.tls_cert = cert.string();
  c.preview.tls_key = key.string();
  c.preview_tls_for_test = [](http::TlsFrontOptions& o) {
    o.handshake_timeout = kHandshakeDeadline;
    o.reload_every = 0ms;  // a renewal is read by the next connection
  };
}

TestBerthd& Berthd() {
  static TestBerthd berthd([](Config& c) {
    UseTls(c, Tls().cert, Tls().key);
    c.max_connections_per_source = static_cast<int>(kPerSource);
  });
  return berthd;
}

json Call(verb method, const std::string& path, const json& body = json::object()) {
  auto api = Berthd().Admin();
  auto r = api.Json(method, path, body);
  INFO(path << ": " << (r ? r->dump() : r.error().message));
  REQUIRE(r.has_value());
  return *r;
}

std::string Workspace(const std::string& name) {
  static std::map<std::string, std::string> made;
  if (auto it = made.find(name); it != made.end()) return it->second;
  auto ws = Call(verb::post, "/v1/workspaces", json{{"name", name}});
  std::string id = ws["id"];
  Call(verb::post, "/v1/workspaces/" + id + "/wait", json{{"state", "running"}, {"timeout_s", 60}});
  made[name] = id;
  return id;
}

std::string Token(const std::string& ws) {
  auto grant = Call(verb::post, "/v1/workspaces/" + ws + "/previews", json{{"port", AppPort()}});
  return grant["token"];
}

uint16_t TlsPort() { return Berthd().daemon().preview_endpoint().port; }
std::string Name(const std::string& ws) { return fmt::format("{}-{}.preview.test", AppPort(), ws); }
std::string Host(const std::string& ws) { return fmt::format("{}:{}", Name(ws), TlsPort()); }

TlsClient::Options To(const std::string& ws, const char* source = nullptr) {
  TlsClient::Options o;
  o.sni = Name(ws);
  o.ca_file = Tls().ca_file;
  o.source = source;
  return o;
}

std::string Get(const std::string& host, const std::string& target, const std::string& extra = "",
                bool close = false) {
  return fmt::format("GET {} HTTP/1.1\r\nHost: {}\r\n{}{}\r\n", target, host, extra,
                     close ? "Connection: close\r\n" : "");
}
std::string TokenHeader(const std::string& token) { return fmt::format("X-Berth-Preview-Token: {}\r\n", token); }

int StatusOf(const std::string& response) {
  return response.size() > 12 && response.starts_with("HTTP/1.1 ") ? std::stoi(response.substr(9, 3)) : 0;
}
std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
json BodyJson(const std::string& response) {
  auto at = response.find("\r\n\r\n");
  REQUIRE(at != std::string::npos);
  auto parsed = ParseJson(response.substr(at + 4));
  REQUIRE(parsed);
  return *parsed;
}

// What the served certificate says, read over a new connection; -1 when none could be made.
long ServedSerial(const std::string& ws) {
  TlsClient c(TlsPort(), To(ws));
  return c.ok() ? c.PeerSerial() : -1;
}

}  // namespace

TEST_CASE("preview tls: a GET through https reaches the app as https, with the client's own address",
          "[preview][tls]") {
  Workspace("web");
  std::string token = Token("web");
  // From 127.0.0.2: the app must see that address, not the socketpair berthd decrypted into.
  TlsClient c(TlsPort(), To("web", "127.0.0.2"));
  REQUIRE(c.ok());
  INFO(c.error());
  CHECK(c.Alpn() == "http/1.1");
  CHECK((c.Version() == "TLSv1.3" || c.Version() == "TLSv1.2"));
  CHECK(c.PeerSubject().find("CN=*.preview.test") != std::string::npos);
  REQUIRE(c.Send(Get(Host("web"), "/hello?x=1", TokenHeader(token) + "X-Forwarded-Proto: http\r\n"
                                                                     "X-Forwarded-For: 6.6.6.6\r\n")));
  std::string answer = c.ReadResponse();
  REQUIRE(StatusOf(answer) == 200);
  auto seen = BodyJson(answer);
  INFO(seen.dump());
  CHECK(seen["target"] == "/hello?x=1");
  CHECK(seen["headers"]["x-forwarded-proto"] == "https");
  CHECK(seen["headers"]["x-forwarded-for"] == "127.0.0.2");
  CHECK(seen["headers"]["x-forwarded-host"] == Host("web"));
  CHECK(seen["headers"]["host"] == fmt::format("localhost:{}", AppPort()));
  // Keep-alive: a second request on the same TLS connection.
  REQUIRE(c.Send(Get(Host("web"), "/again", TokenHeader(token))));
  auto again = c.ReadResponse();
  CHECK(StatusOf(again) == 200);
  CHECK(BodyJson(again)["target"] == "/again");
}

TEST_CASE("preview tls: links say https and the TLS listener's port; berthd's end is a clean close_notify",
          "[preview][tls]") {
  std::string ws = Workspace("web");
  auto grant = Call(verb::post, "/v1/workspaces/" + ws + "/previews", json{{"port", AppPort()}});
  std::string token = grant["token"];
  CHECK(grant["url"] == fmt::format("https://{}-web.preview.test:{}/", AppPort(), TlsPort()));
  CHECK(grant["link"].get<std::string>().starts_with(fmt::format("https://{}-web.preview.test:{}/?", AppPort(), TlsPort())));
  auto ports = Call(verb::get, "/v1/workspaces/" + ws + "/ports");
  bool linked = false;
  for (const auto& p : ports["ports"]) {
    if (p["port"] == AppPort()) linked = p["preview_url"] == grant["url"];
  }
  CHECK(linked);
  // Connection: close: the answer whole, then close_notify (not a truncated stream).
  TlsClient c(TlsPort(), To("web"));
  REQUIRE(c.ok());
  REQUIRE(c.Send(Get(Host("web"), "/bye", TokenHeader(token), true)));
  auto all = c.ReadToClose();
  CHECK(StatusOf(all) == 200);
  CHECK(all.find("\"/bye\"") != std::string::npos);
  CHECK(c.closed_cleanly());
}

TEST_CASE("preview tls: `berth preview` prints the https link, and the link opens the preview",
          "[preview][tls][cli]") {
  Workspace("web");
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  cli::Environment env;
  env.getenv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  env.in = &in;
  env.out = &out;
  env.err = &err;
  env.now = [] { return std::chrono::system_clock::now(); };
  cli::App app;
  int code = app.Run({"--url", Berthd().daemon().url(), "--api-key", Berthd().admin_key(), "preview", "web",
                      std::to_string(AppPort())},
                     env);
  INFO(err.str());
  REQUIRE(code == 0);
  std::string link = out.str();
  while (!link.empty() && (link.back() == '\n' || link.back() == '\r')) link.pop_back();
  std::string origin = fmt::format("https://{}", Host("web"));
  INFO(link);
  REQUIRE(link.starts_with(origin + "/?berth_preview_token=bpt_"));
  // As a browser opens it: the token becomes the host's cookie, and the cookie the app.
  TlsClient c(TlsPort(), To("web"));
  REQUIRE(c.ok());
  REQUIRE(c.Send(Get(Host("web"), link.substr(origin.size()))));
  auto first = c.ReadResponse();
  REQUIRE(StatusOf(first) == 303);
  auto at = first.find("__Host-berth_preview_token=");
  REQUIRE(at != std::string::npos);
  std::string cookie = first.substr(at, first.find(';', at) - at);
  REQUIRE(c.Send(Get(Host("web"), "/", "Cookie: " + cookie + "\r\n")));
  CHECK(StatusOf(c.ReadResponse()) == 200);
}

TEST_CASE("preview tls: a token in the query becomes a __Host- cookie with Secure", "[preview][tls]") {
  Workspace("web");
  std::string token = Token("web");
  TlsClient c(TlsPort(), To("web"));
  REQUIRE(c.ok());
  REQUIRE(c.Send(Get(Host("web"), "/page?berth_preview_token=" + token + "&y=2")));
  auto raw = c.ReadResponse();
  CHECK(StatusOf(raw) == 303);
  auto answer = Lower(raw);
  CHECK(answer.find("\r\nlocation: /page?y=2\r\n") != std::string::npos);
  auto at = answer.find("\r\nset-cookie: ");
  REQUIRE(at != std::string::npos);
  std::string cookie = answer.substr(at + 14, answer.find("\r\n", at + 2) - at - 14);
  INFO(cookie);
  CHECK(cookie.starts_with("__host-berth_preview_token=" + Lower(token) + ";"));
  CHECK(cookie.find("; secure") != std::string::npos);
  CHECK(cookie.find("httponly") != std::string::npos);
  CHECK(cookie.find("path=/") != std::string::npos);
  CHECK(cookie.find("domain") == std::string::npos);
  // The cookie opens the preview, and the app never sees it.
  REQUIRE(c.Send(Get(Host("web"), "/page?y=2", fmt::format("Cookie: __Host-berth_preview_token={}; app=1\r\n", token))));
  auto opened = c.ReadResponse();
  REQUIRE(StatusOf(opened) == 200);
  CHECK(BodyJson(opened)["headers"]["cookie"] == "app=1");
}

TEST_CASE("preview tls: a WebSocket upgrade round-trips through TLS", "[preview][tls]") {
  Workspace("web");
  std::string token = Token("web");
  namespace ssl = boost::asio::ssl;
  namespace websocket = boost::beast::websocket;
  boost::asio::io_context io;
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(Tls().ca_file.string());
  ctx.set_verify_mode(ssl::verify_peer);
  websocket::stream<ssl::stream<boost::asio::ip::tcp::socket>> ws(io, ctx);
  boost::beast::get_lowest_layer(ws).connect({boost::asio::ip::make_address("127.0.0.1"), TlsPort()});
  SSL_set_tlsext_host_name(ws.next_layer().native_handle(), Name("web").c_str());
  ws.next_layer().set_verify_callback(ssl::host_name_verification(Name("web")));
  ws.next_layer().handshake(ssl::stream_base::client);
  ws.set_option(websocket::stream_base::decorator([&](websocket::request_type& req) {
    req.set("X-Berth-Preview-Token", token);
    req.set(http::bhttp::field::origin, "https://" + Host("web"));
  }));
  ws.handshake(Host("web"), "/ws?token=vite");
  boost::beast::flat_buffer hello;
  ws.read(hello);
  CHECK(boost::beast::buffers_to_string(hello.data()) == "connected");
  for (const std::string& message : std::vector<std::string>{"ping", std::string(100 * 1024, 'x')}) {
    ws.text(true);
    ws.write(boost::asio::buffer(message));
    boost::beast::flat_buffer echo;
    ws.read(echo);
    CHECK(boost::beast::buffers_to_string(echo.data()) == message);
  }
  json seen;
  {
    std::lock_guard lock(Log().mutex);
    seen = Log().last;
  }
  CHECK(seen["target"] == "/ws?token=vite");
  CHECK(seen["headers"]["x-forwarded-proto"] == "https");
  // The page's own https origin is the app's own localhost origin to the app.
  CHECK(seen["headers"]["origin"] == fmt::format("http://localhost:{}", AppPort()));
  ws.close(websocket::close_code::normal);
}

TEST_CASE("preview tls: plain HTTP to the TLS port gets no HTTP answer and breaks nothing", "[preview][tls]") {
  Workspace("web");
  std::string token = Token("web");
  for (int i = 0; i < 3; ++i) {
    RawConnection c(TlsPort());
    REQUIRE(c.ok());
    REQUIRE(c.Send(Get(Host("web"), "/", TokenHeader(token), true)));
    CHECK(c.WaitClosed(10s));
    INFO(c.received());
    CHECK_FALSE(c.received().starts_with("HTTP/"));
  }
  // Garbage shaped like a TLS record, too.
  RawConnection junk(TlsPort());
  REQUIRE(junk.Send(std::string("\x16\x03\x01\x00\x05hello", 10)));
  CHECK(junk.WaitClosed(10s));
  // TLS still works, and so does the API.
  TlsClient c(TlsPort(), To("web"));
  REQUIRE(c.ok());
  REQUIRE(c.Send(Get(Host("web"), "/after", TokenHeader(token))));
  CHECK(StatusOf(c.ReadResponse()) == 200);
  Call(verb::get, "/v1/workspaces");
}

TEST_CASE("preview tls: a client that never finishes its handshake is dropped at the deadline", "[preview][tls]") {
  Workspace("web");
  // Silent: TCP only.
  auto start = std::chrono::steady_clock::now();
  RawConnection silent(TlsPort());
  REQUIRE(silent.ok());
  // Trickling: the first bytes of a ClientHello, then nothing; the deadline is the total.
  RawConnection trickle(TlsPort());
  REQUIRE(trickle.ok());
  REQUIRE(trickle.Send(std::string("\x16\x03\x01\x02\x00\x01", 6)));
  CHECK(silent.WaitClosed(10s));
  CHECK(trickle.WaitClosed(10s));
  auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= kHandshakeDeadline - 100ms);  // the deadline closed them, nothing sooner
  CHECK(silent.received().empty());
  // The listener carries on.
  TlsClient after(TlsPort(), To("web"));
  CHECK(after.ok());
}

TEST_CASE("preview tls: the per-source connection cap counts TLS clients by their own address",
          "[preview][tls]") {
  Workspace("web");
  std::string token = Token("web");
  // kPerSource connections from 127.0.0.3, each through a request (so it is surely adopted).
  std::vector<std::unique_ptr<TlsClient>> held;
  for (size_t i = 0; i < kPerSource; ++i) {
    held.push_back(std::make_unique<TlsClient>(TlsPort(), To("web", "127.0.0.3")));
    REQUIRE(held.back()->ok());
    REQUIRE(held.back()->Send(Get(Host("web"), "/held", TokenHeader(token))));
    REQUIRE(StatusOf(held.back()->ReadResponse()) == 200);
  }
  // One more from there: refused by the server (over TLS), as a plain listener refuses.
  {
    TlsClient over(TlsPort(), To("web", "127.0.0.3"));
    REQUIRE(over.ok());
    (void)over.Send(Get(Host("web"), "/over", TokenHeader(token)));
    auto answer = over.ReadToClose();
    INFO(answer);
    CHECK(StatusOf(answer) == 429);
    CHECK(answer.find("too_many_connections") != std::string::npos);
    CHECK(answer.find("127.0.0.3") != std::string::npos);
  }
  // Another address is not held up by it.
  TlsClient other(TlsPort(), To("web", "127.0.0.4"));
  REQUIRE(other.ok());
  REQUIRE(other.Send(Get(Host("web"), "/other", TokenHeader(token))));
  CHECK(StatusOf(other.ReadResponse()) == 200);
  // One of the held ones goes: 127.0.0.3 may connect again.
  held.pop_back();
  CHECK(WaitFor([&] {
    TlsClient again(TlsPort(), To("web", "127.0.0.3"));
    return again.ok() && again.Send(Get(Host("web"), "/again", TokenHeader(token))) &&
           StatusOf(again.ReadResponse()) == 200;
  }));
}

TEST_CASE("preview tls: a renewed certificate is served without a restart; a broken one is not",
          "[preview][tls]") {
  Workspace("web");
  REQUIRE(ServedSerial("web") == 100);
  // Renewed: a new key and certificate (rename over the old files, as certbot's deploy does).
  Tls().ca.Issue("*.preview.test renewed", "DNS:*.preview.test", 101, Tls().cert, Tls().key);
  CHECK(WaitFor([] { return ServedSerial("web") == 101; }));
  TlsClient renewed(TlsPort(), To("web"));
  REQUIRE(renewed.ok());
  CHECK(renewed.PeerSubject().find("renewed") != std::string::npos);
  // A key that is not the certificate's: the last good pair stays.
  testing::TestCa::WriteStrayKey(Tls().key);
  for (int i = 0; i < 3; ++i) CHECK(ServedSerial("web") == 101);
  // A certificate file that is not one: the same.
  {
    std::ofstream(Tls().cert.string() + ".tmp") << "not a certificate\n";
    fs::rename(Tls().cert.string() + ".tmp", Tls().cert);
  }
  CHECK(ServedSerial("web") == 101);
  // Good again: picked up.
  Tls().ca.Issue("*.preview.test again", "DNS:*.preview.test", 102, Tls().cert, Tls().key);
  CHECK(WaitFor([] { return ServedSerial("web") == 102; }));
}

TEST_CASE("preview tls: a key that does not match, or a certificate that does not load, stops berthd at start",
          "[preview][tls]") {
  testing::TempDir dir("preview-tls-bad");
  fs::path cert = dir.path() / "cert.pem";
  fs::path key = dir.path() / "key.pem";
  fs::path stray = dir.path() / "stray.key";
  Tls().ca.Issue("*.preview.test", "DNS:*.preview.test", 7, cert, key);
  testing::TestCa::WriteStrayKey(stray);
  CHECK_THROWS_WITH(TestBerthd([&](Config& c) { UseTls(c, cert, stray); }),
                    Catch::Contains(stray.string()) && Catch::Contains("does not match"));
  fs::path garbage = dir.path() / "garbage.pem";
  std::ofstream(garbage) << "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  CHECK_THROWS_WITH(TestBerthd([&](Config& c) { UseTls(c, garbage, key); }),
                    Catch::Contains(garbage.string()) && Catch::Contains("does not load"));
  CHECK_THROWS_WITH(TestBerthd([&](Config& c) { UseTls(c, cert, dir.path() / "missing.key"); }),
                    Catch::Contains((dir.path() / "missing.key").string()));
  // The good pair starts.
  TestBerthd good([&](Config& c) { UseTls(c, cert, key); });
  CHECK(good.daemon().preview_endpoint().port != 0);
}

}  // namespace berth
