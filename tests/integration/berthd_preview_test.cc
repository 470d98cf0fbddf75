// berthd's preview proxy end to end, without a VM: berthd in-process on the unix transport
// (each workspace's agent a host process), and the "app" an HTTP server on the host's
// loopback, which the agent's tunnel reaches as a guest's 127.0.0.1. Requests are written by
// hand on raw sockets, so the tests say exactly what a browser or an attacker sends.
#include <catch2/catch.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/websocket.hpp>
#include <fmt/format.h>

#include <mutex>

#include "common/json.h"
#include "tests/support/fake_server.h"
#include "tests/support/mcp_exchange.h"
#include "tests/support/raw_http.h"
#include "tests/support/test_berthd.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using namespace std::chrono_literals;
using testing::RawConnection;
using testing::TestBerthd;
using testing::WaitFor;

// --- the app -----------------------------------------------------------------------------------

// What the app saw of the last requests, for the checks on what reaches a guest.
struct AppLog {
  std::mutex mutex;
  std::vector<json> requests;
  void Add(json j) {
    std::lock_guard lock(mutex);
    requests.push_back(std::move(j));
  }
  size_t Count() {
    std::lock_guard lock(mutex);
    return requests.size();
  }
  json Last() {
    std::lock_guard lock(mutex);
    return requests.empty() ? json() : requests.back();
  }
};

AppLog& Log() {
  static AppLog log;
  return log;
}

json HeadersOf(const http::Exchange& ex) {
  json h = json::object();
  for (const auto& f : ex.request()) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (h.contains(name)) {
      h[name] = h[name].get<std::string>() + "\n" + std::string(f.value());
    } else {
      h[name] = std::string(f.value());
    }
  }
  return h;
}

http::Task<void> App(http::Exchange& ex) {
  json seen = {{"method", std::string(ex.request().method_string())},
               {"target", std::string(ex.target())},
               {"headers", HeadersOf(ex)}};
  if (ex.path() == "/ws" && ex.IsWebSocketUpgrade()) {
    Log().Add(seen);
    auto ws = co_await ex.AcceptWebSocket();
    if (!ws) co_return;
    // Like Vite: a message at once (it may share a segment with the 101), then one the server
    // sends later of its own accord (an HMR update), then the echo.
    (*ws)->text(true);
    std::string hello = "connected";
    auto [hec, hn] = co_await (*ws)->async_write(boost::asio::buffer(hello), boost::asio::as_tuple(boost::asio::use_awaitable));
    if (hec) co_return;
    boost::asio::steady_timer later(co_await boost::asio::this_coro::executor, 300ms);
    co_await later.async_wait(boost::asio::use_awaitable);
    std::string update = "update";
    auto [uec, un] = co_await (*ws)->async_write(boost::asio::buffer(update), boost::asio::as_tuple(boost::asio::use_awaitable));
    if (uec) co_return;
    // Echoes text frames until the peer closes.
    for (;;) {
      boost::beast::flat_buffer buffer;
      auto [ec, n] = co_await (*ws)->async_read(buffer, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (ec) co_return;
      (*ws)->text(true);
      auto [wec, wn] = co_await (*ws)->async_write(buffer.data(), boost::asio::as_tuple(boost::asio::use_awaitable));
      if (wec) co_return;
    }
  }
  size_t body_bytes = 0;
  http::Exchange::ChunkSink sink = [&](std::string_view data) -> http::Task<Status> {
    body_bytes += data.size();
    co_return Status{};
  };
  auto read = co_await ex.ReadBodyChunks(sink);
  (void)read;
  seen["body_bytes"] = body_bytes;
  Log().Add(seen);
  if (ex.path() == "/chunked") {
    std::vector<std::pair<std::string, std::string>> headers = {{"X-App", "chunks"}};
    if (!co_await ex.BeginChunked(http::bhttp::status::ok, "text/plain", headers)) co_return;
    for (int i = 0; i < 5; ++i) {
      std::string part = fmt::format("part{};", i);
      if (!co_await ex.WriteChunk(part)) co_return;
    }
    auto ended = co_await ex.EndChunked();
    (void)ended;
    co_return;
  }
  if (ex.path() == "/cookies") {
    http::bhttp::response<http::bhttp::string_body> res{http::bhttp::status::ok, 11};
    res.insert(http::bhttp::field::set_cookie, "sid=1; Domain=preview.localhost; Path=/");
    res.insert(http::bhttp::field::set_cookie, "theme=dark");
    res.insert(http::bhttp::field::set_cookie, "berth_preview_token=bpt_evil; Path=/");
    res.insert(http::bhttp::field::access_control_allow_origin, "https://app.example");
    res.body() = "cookies";
    co_await ex.Send(std::move(res));
    co_return;
  }
  if (ex.path() == "/notype") {
    http::bhttp::response<http::bhttp::string_body> res{http::bhttp::status::ok, 11};
    res.body() = "x";
    co_await ex.Send(std::move(res));
    co_return;
  }
  std::string body = DumpJson(seen);
  co_await testing::SendText(ex, "application/json", body);
}

testing::FakeServer& TheApp() {
  static testing::FakeServer app(App);
  return app;
}

// --- berthd and its workspaces -------------------------------------------------------------------

TestBerthd& Berthd() {
  static TestBerthd berthd;
  return berthd;
}

json Call(verb method, const std::string& path, const json& body = json::object()) {
  auto api = Berthd().Admin();
  auto r = api.Json(method, path, body);
  INFO(path << ": " << (r ? r->dump() : r.error().message));
  REQUIRE(r.has_value());
  return *r;
}

// A running workspace named `name` (made once per test binary).
std::string Workspace(const std::string& name) {
  static std::map<std::string, std::string> made;
  if (auto it = made.find(name); it != made.end()) return it->second;
  auto ws = Call(verb::post, "/v1/workspaces", json{{"name", name}});
  std::string id = ws["id"];
  Call(verb::post, "/v1/workspaces/" + id + "/wait", json{{"state", "running"}, {"timeout_s", 60}});
  made[name] = id;
  return id;
}

std::string State(const std::string& ws) { return Call(verb::get, "/v1/workspaces/" + ws)["state"]; }

json Preview(const std::string& ws, int port, bool is_public = false) {
  return Call(verb::post, "/v1/workspaces/" + ws + "/previews", json{{"port", port}, {"public", is_public}});
}

uint16_t AppPort() { return TheApp().endpoint().port; }
uint16_t BerthdPort() { return Berthd().daemon().endpoint().port; }
std::string Host(uint16_t port, const std::string& ws) {
  return fmt::format("{}-{}.preview.localhost:{}", port, ws, BerthdPort());
}

// --- a raw HTTP client -----------------------------------------------------------------------------

struct Answer {
  int status = 0;
  std::string head;  // lowercased
  std::string body;  // de-chunked
  std::vector<std::string> Headers(const std::string& name) const {
    std::vector<std::string> out;
    std::string key = "\r\n" + name + ":";
    for (size_t at = head.find(key); at != std::string::npos; at = head.find(key, at + 1)) {
      size_t end = head.find("\r\n", at + 2);
      std::string value = head.substr(at + key.size(), end - at - key.size());
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      out.push_back(value);
    }
    return out;
  }
  std::string Header(const std::string& name) const {
    auto all = Headers(name);
    return all.empty() ? "" : all.front();
  }
};

std::string Dechunk(std::string_view body) {
  std::string out;
  while (!body.empty()) {
    size_t eol = body.find("\r\n");
    if (eol == std::string_view::npos) break;
    size_t n = std::stoul(std::string(body.substr(0, eol)), nullptr, 16);
    if (n == 0) break;
    out.append(body.substr(eol + 2, n));
    body.remove_prefix(eol + 2 + n + 2);
  }
  return out;
}

// Sends `request` (whole, as written) on a new connection and reads the answer to the close.
Answer Send(const std::string& request) {
  RawConnection c(BerthdPort());
  REQUIRE(c.ok());
  REQUIRE(c.Send(request));
  c.WaitClosed(20s);
  std::string all = c.received();
  Answer a;
  size_t end = all.find("\r\n\r\n");
  if (end == std::string::npos) return a;
  a.head = all.substr(0, end + 2);
  for (char& ch : a.head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (a.head.size() > 12) a.status = std::stoi(a.head.substr(9, 3));
  std::string body = all.substr(end + 4);
  a.body = a.head.find("transfer-encoding: chunked") != std::string::npos ? Dechunk(body) : body;
  return a;
}

std::string Get(const std::string& host, const std::string& target, const std::string& extra = "") {
  return fmt::format("GET {} HTTP/1.1\r\nHost: {}\r\n{}Connection: close\r\n\r\n", target, host, extra);
}

std::string TokenHeader(const std::string& token) { return fmt::format("X-Berth-Preview-Token: {}\r\n", token); }

}  // namespace

TEST_CASE("preview: a request with no credential is refused and a stopped workspace stays stopped",
          "[preview]") {
  std::string ws = Workspace("sleepy");
  Call(verb::post, "/v1/workspaces/" + ws + "/stop");
  Call(verb::post, "/v1/workspaces/" + ws + "/wait", json{{"state", "stopped"}, {"timeout_s", 30}});
  size_t before = Log().Count();
  auto a = Send(Get(Host(AppPort(), "sleepy"), "/"));
  CHECK(a.status == 401);
  auto browser = Send(Get(Host(AppPort(), "sleepy"), "/", "Accept: text/html\r\n"));
  CHECK(browser.status == 401);
  CHECK(browser.body.find("private preview") != std::string::npos);
  // A forged or unknown token is no better.
  auto forged = Send(Get(Host(AppPort(), "sleepy"), "/", TokenHeader("bpt_" + std::string(64, 'a'))));
  CHECK(forged.status == 401);
  CHECK(State(ws) == "stopped");
  CHECK(Log().Count() == before);
}

TEST_CASE("preview: a token opens exactly its workspace and port, until revoked or expired", "[preview]") {
  std::string ws = Workspace("web");
  std::string other = Workspace("other");
  auto grant = Preview(ws, AppPort());
  std::string token = grant["token"];
  CHECK(grant["link"].get<std::string>().find("?berth_preview_token=" + token) != std::string::npos);
  CHECK(grant["url"] == fmt::format("http://{}-web.preview.localhost:{}/", AppPort(), BerthdPort()));

  auto ok = Send(Get(Host(AppPort(), "web"), "/hello", TokenHeader(token)));
  REQUIRE(ok.status == 200);
  CHECK(ParseJson(ok.body).value()["target"] == "/hello");
  // By id as well as by name.
  CHECK(Send(Get(Host(AppPort(), ws), "/", TokenHeader(token))).status == 200);
  // Another port of the same workspace, the same port of another workspace: refused, and the
  // app sees neither.
  size_t before = Log().Count();
  CHECK(Send(Get(Host(AppPort() == 65535 ? 1 : AppPort() + 1, "web"), "/", TokenHeader(token))).status == 403);
  CHECK(Send(Get(Host(AppPort(), "other"), "/", TokenHeader(token))).status == 403);
  CHECK(Send(Get(Host(AppPort(), other), "/", TokenHeader(token))).status == 403);
  CHECK(Log().Count() == before);

  // The first use is on the timeline, once.
  auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events");
  int used = 0;
  for (const auto& e : events["events"]) used += e["type"] == "preview_token_used" ? 1 : 0;
  CHECK(used == 1);
  auto listed = Call(verb::get, "/v1/workspaces/" + ws + "/previews");
  REQUIRE(listed["previews"].size() >= 1);
  CHECK(listed["previews"][0]["id"] == grant["id"]);
  CHECK_FALSE(listed["previews"][0]["last_used_at"].is_null());
  CHECK_FALSE(listed["previews"][0].contains("token"));

  // Revoked: refused at once.
  Call(verb::delete_, "/v1/workspaces/" + ws + "/previews/" + grant["id"].get<std::string>());
  CHECK(Send(Get(Host(AppPort(), "web"), "/", TokenHeader(token))).status == 401);

  // Expired: a grant whose time is up (set in the store: the shortest grant is a minute).
  auto short_lived = Preview(ws, AppPort());
  std::string expired_token = short_lived["token"];
  std::string sql = fmt::format("UPDATE previews SET expires_at = 1 WHERE id = '{}';",
                                short_lived["id"].get<std::string>());
  REQUIRE(std::system(fmt::format("sqlite3 {}/berth.db \"{}\"", Berthd().data_dir().string(), sql).c_str()) == 0);
  CHECK(Send(Get(Host(AppPort(), "web"), "/", TokenHeader(expired_token))).status == 401);
}

TEST_CASE("preview: a workspace name too long for a preview host is refused at create and rename",
          "[preview]") {
  auto api = Berthd().Admin();
  auto made = api.Json(verb::post, "/v1/workspaces", json{{"name", std::string(58, 'a')}});
  REQUIRE_FALSE(made);
  CHECK(made.error().code == ErrorCode::kInvalidArgument);
  std::string ws = Workspace("web");
  auto renamed = api.Json(verb::patch, "/v1/workspaces/" + ws, json{{"name", std::string(58, 'b')}});
  REQUIRE_FALSE(renamed);
  CHECK(renamed.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("preview: a token in the query becomes a host-only HttpOnly cookie and the URL comes back clean",
          "[preview]") {
  Workspace("web");
  std::string token = Preview(Workspace("web"), AppPort())["token"];
  size_t before = Log().Count();
  auto a = Send(Get(Host(AppPort(), "web"), fmt::format("/page?x=1&berth_preview_token={}&y=2", token)));
  CHECK(a.status == 303);
  CHECK(a.Header("location") == "/page?x=1&y=2");
  auto cookie = a.Header("set-cookie");
  CHECK(cookie.starts_with("berth_preview_token=" + token + ";"));
  CHECK(cookie.find("httponly") != std::string::npos);
  CHECK(cookie.find("samesite=lax") != std::string::npos);
  CHECK(cookie.find("domain") == std::string::npos);
  CHECK(Log().Count() == before);  // the app never saw the token's request
  auto with_cookie = Send(Get(Host(AppPort(), "web"), "/page?x=1&y=2",
                              fmt::format("Cookie: app=1; berth_preview_token={}\r\n", token)));
  CHECK(with_cookie.status == 200);
  // A bad token in the query sets nothing.
  auto bad = Send(Get(Host(AppPort(), "web"), "/?berth_preview_token=bpt_nope"));
  CHECK(bad.status == 401);
  CHECK(bad.Header("set-cookie").empty());
}

TEST_CASE("preview: the app sees no Berth credential, Host localhost:PORT and berthd's X-Forwarded-*",
          "[preview]") {
  Workspace("web");
  std::string token = Preview(Workspace("web"), AppPort())["token"];
  std::string host = Host(AppPort(), "web");
  // An API key of the tenant opens it too, and is stripped like the token.
  auto a = Send(Get(host, "/echo",
                    fmt::format("Authorization: Bearer {}\r\nCookie: berth_preview_token={}; app=1\r\n"
                                "X-Berth-Preview-Token: {}\r\nX-Forwarded-For: 6.6.6.6\r\n"
                                "X-Forwarded-Host: evil.example\r\nOrigin: http://{}\r\n",
                                Berthd().admin_key(), token, token, host)));
  REQUIRE(a.status == 200);
  auto seen = ParseJson(a.body).value();
  auto h = seen["headers"];
  INFO(h.dump());
  CHECK_FALSE(h.contains("authorization"));
  CHECK_FALSE(h.contains("x-berth-preview-token"));
  CHECK(h["cookie"] == "app=1");
  CHECK(h["host"] == fmt::format("localhost:{}", AppPort()));
  CHECK(h["origin"] == fmt::format("http://localhost:{}", AppPort()));
  CHECK(h["x-forwarded-for"] == "127.0.0.1");
  CHECK(h["x-forwarded-host"] == host);
  CHECK(h["x-forwarded-proto"] == "http");
  std::string everything = h.dump();
  CHECK(everything.find(token) == std::string::npos);
  CHECK(everything.find(Berthd().admin_key()) == std::string::npos);
  // The app's own Basic credentials pass.
  auto basic = Send(Get(host, "/echo", TokenHeader(token) + "Authorization: Basic dTpw\r\n"));
  CHECK(ParseJson(basic.body).value()["headers"]["authorization"] == "Basic dTpw");
}

TEST_CASE("preview: bodies stream both ways, chunked answers stay whole, keep-alive carries on",
          "[preview]") {
  Workspace("web");
  std::string token = Preview(Workspace("web"), AppPort())["token"];
  std::string host = Host(AppPort(), "web");
  // A 4 MiB upload with a length, and a chunked one.
  std::string big(4 << 20, 'x');
  auto up = Send(fmt::format("POST /upload HTTP/1.1\r\nHost: {}\r\n{}Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                             host, TokenHeader(token), big.size(), big));
  REQUIRE(up.status == 200);
  CHECK(ParseJson(up.body).value()["body_bytes"] == big.size());
  auto chunked_up = Send(fmt::format("POST /upload HTTP/1.1\r\nHost: {}\r\n{}Transfer-Encoding: chunked\r\n"
                                     "Connection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
                                     host, TokenHeader(token)));
  CHECK(ParseJson(chunked_up.body).value()["body_bytes"] == 11);
  auto chunks = Send(Get(host, "/chunked", TokenHeader(token)));
  CHECK(chunks.status == 200);
  CHECK(chunks.body == "part0;part1;part2;part3;part4;");
  CHECK(chunks.Header("x-app") == "chunks");
  // No Content-Type from the app: none from berthd either.
  auto untyped = Send(Get(host, "/notype", TokenHeader(token)));
  CHECK(untyped.status == 200);
  CHECK(untyped.Header("content-type").empty());
  // HEAD: the header alone.
  auto head = Send(fmt::format("HEAD /echo HTTP/1.1\r\nHost: {}\r\n{}Connection: close\r\n\r\n", host, TokenHeader(token)));
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  // Two requests on one connection.
  RawConnection c(BerthdPort());
  for (int i = 0; i < 2; ++i) {
    REQUIRE(c.Send(fmt::format("GET /k{} HTTP/1.1\r\nHost: {}\r\n{}\r\n", i, host, TokenHeader(token))));
    auto r = c.ReadResponse(20s);
    CHECK(r.starts_with("HTTP/1.1 200"));
    CHECK(r.find(fmt::format("/k{}", i)) != std::string::npos);
  }
}

TEST_CASE("preview: the app's cookies lose their Domain and cannot be Berth's; its other headers pass",
          "[preview]") {
  std::string token = Preview(Workspace("web"), AppPort())["token"];
  auto a = Send(Get(Host(AppPort(), "web"), "/cookies", TokenHeader(token)));
  REQUIRE(a.status == 200);
  auto cookies = a.Headers("set-cookie");
  std::vector<std::string> expected = {"sid=1; path=/", "theme=dark"};
  CHECK(cookies == expected);
  CHECK(a.Headers("access-control-allow-origin") == std::vector<std::string>{"https://app.example"});
}

TEST_CASE("preview: a WebSocket upgrade reaches the app end to end; the token must cover its port",
          "[preview]") {
  std::string token = Preview(Workspace("web"), AppPort())["token"];
  namespace websocket = boost::beast::websocket;
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), BerthdPort()});
  websocket::stream<boost::asio::ip::tcp::socket> ws(std::move(socket));
  ws.set_option(websocket::stream_base::decorator([&](websocket::request_type& req) {
    req.set("X-Berth-Preview-Token", token);
  }));
  ws.handshake(Host(AppPort(), "web"), "/ws?token=vite");
  for (std::string expected : {"connected", "update"}) {
    boost::beast::flat_buffer pushed;
    ws.read(pushed);
    CHECK(boost::beast::buffers_to_string(pushed.data()) == expected);
  }
  ws.text(true);
  ws.write(boost::asio::buffer(std::string("ping")));
  boost::beast::flat_buffer buffer;
  ws.read(buffer);
  CHECK(boost::beast::buffers_to_string(buffer.data()) == "ping");
  auto seen = Log().Last();
  CHECK(seen["target"] == "/ws?token=vite");
  CHECK(seen["headers"]["host"] == fmt::format("localhost:{}", AppPort()));
  ws.close(websocket::close_code::normal);
  // The same upgrade on a port the token does not cover never reaches anything.
  auto refused = Send(fmt::format("GET /ws HTTP/1.1\r\nHost: {}\r\n{}Connection: Upgrade, close\r\nUpgrade: websocket\r\n"
                                  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                                  Host(AppPort() == 65535 ? 1 : AppPort() + 1, "web"), TokenHeader(token)));
  CHECK(refused.status == 403);
}

TEST_CASE("preview: a port where nothing listens gets a 502 naming it and linking the ports that do",
          "[preview]") {
  std::string ws = Workspace("web");
  // A port nothing listens on: bind one and close it.
  uint16_t dead = 0;
  {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    dead = a.local_endpoint().port();
  }
  std::string token = Preview(ws, dead)["token"];
  auto a = Send(Get(Host(dead, "web"), "/", TokenHeader(token) + "Accept: text/html\r\n"));
  CHECK(a.status == 502);
  CHECK(a.body.find(fmt::format("port {}", dead)) != std::string::npos);
  // The app's port listens (in the host's /proc, as a unix-transport agent sees it): linked.
  CHECK(a.body.find(fmt::format("http://{}-web.preview.localhost:{}/", AppPort(), BerthdPort())) != std::string::npos);
  CHECK(a.head.find("refresh") == std::string::npos);  // the reload is in the page, not a header
  CHECK(a.body.find("http-equiv=\"refresh\"") != std::string::npos);
  // The ports list says where each port's preview is.
  auto ports = Call(verb::get, "/v1/workspaces/" + ws + "/ports");
  bool linked = false;
  for (const auto& p : ports["ports"]) {
    if (p["port"] == AppPort()) linked = p["preview_url"] == fmt::format("http://{}-web.preview.localhost:{}/", AppPort(), BerthdPort());
  }
  CHECK(linked);
}

TEST_CASE("preview: hostile hosts and smuggling are refused before any lookup or guest", "[preview]") {
  std::string token = Preview(Workspace("web"), AppPort())["token"];
  size_t before = Log().Count();
  std::string port = std::to_string(AppPort());
  for (std::string host : {"0" + port + "-web.preview.localhost", "+" + port + "-web.preview.localhost",
                           port + " -web.preview.localhost", port + "-web.preview.localhost.",
                           port + "-" + std::string(70, 'a') + ".preview.localhost",
                           "x." + port + "-web.preview.localhost"}) {
    INFO(host);
    CHECK(Send(Get(host, "/", TokenHeader(token))).status == 400);
  }
  std::string host = Host(AppPort(), "web");
  // Content-Length with Transfer-Encoding, two Content-Lengths, a header with a bare LF in
  // its value, an absolute-form target naming another host.
  std::vector<std::string> smuggled = {
      fmt::format("POST / HTTP/1.1\r\nHost: {}\r\n{}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", host, TokenHeader(token)),
      fmt::format("POST / HTTP/1.1\r\nHost: {}\r\n{}Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", host, TokenHeader(token)),
      fmt::format("GET / HTTP/1.1\r\nHost: {}\r\n{}X-A: a\nX-Injected: 1\r\n\r\n", host, TokenHeader(token)),
      fmt::format("GET http://127.0.0.1:{}/ HTTP/1.1\r\nHost: {}\r\n{}\r\n", BerthdPort(), host, TokenHeader(token)),
  };
  for (const auto& request : smuggled) {
    INFO(request);
    auto a = Send(request);
    CHECK(a.status == 400);
  }
  CHECK(Log().Count() == before);
}

TEST_CASE("preview: a public preview shows an interstitial once; API clients skip it by a header",
          "[preview]") {
  std::string ws = Workspace("pub");
  auto grant = Preview(ws, AppPort(), true);
  CHECK_FALSE(grant.contains("token"));
  std::string host = Host(AppPort(), "pub");
  size_t before = Log().Count();
  auto first = Send(Get(host, "/docs", "Accept: text/html\r\n"));
  CHECK(first.status == 200);
  CHECK(first.Header("x-berth-interstitial") == "1");
  CHECK(first.body.find("/__berth/continue?to=/docs") != std::string::npos);
  CHECK(Log().Count() == before);
  auto go = Send(Get(host, "/__berth/continue?to=/docs"));
  CHECK(go.status == 303);
  CHECK(go.Header("location") == "/docs");
  CHECK(go.Header("set-cookie").starts_with("berth_preview_ack=1;"));
  // Never off this host.
  CHECK(Send(Get(host, "/__berth/continue?to=//evil.example/")).Header("location") == "/");
  CHECK(Send(Get(host, "/docs", "Cookie: berth_preview_ack=1\r\n")).status == 200);
  CHECK(Send(Get(host, "/docs", "X-Berth-Skip-Interstitial: 1\r\n")).status == 200);
  // Another port of it is still private.
  CHECK(Send(Get(Host(AppPort() == 65535 ? 1 : AppPort() + 1, "pub"), "/", "X-Berth-Skip-Interstitial: 1\r\n")).status == 401);
}

TEST_CASE("preview: an authorised request wakes a stopped workspace, says so, and then goes through",
          "[preview]") {
  std::string ws = Workspace("waker");
  std::string token = Preview(ws, AppPort())["token"];
  Call(verb::post, "/v1/workspaces/" + ws + "/stop");
  Call(verb::post, "/v1/workspaces/" + ws + "/wait", json{{"state", "stopped"}, {"timeout_s", 30}});
  std::string host = Host(AppPort(), "waker");
  auto api_client = Send(Get(host, "/", TokenHeader(token)));
  CHECK(api_client.status == 503);
  CHECK_FALSE(api_client.Header("retry-after").empty());
  auto browser = Send(Get(host, "/", TokenHeader(token) + "Accept: text/html\r\n"));
  CHECK(browser.body.find("Waking your workspace") != std::string::npos);
  CHECK(browser.body.find("http-equiv=\"refresh\"") != std::string::npos);
  Call(verb::post, "/v1/workspaces/" + ws + "/wait", json{{"state", "running"}, {"timeout_s", 60}});
  auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events");
  bool woken = false;
  for (const auto& e : events["events"]) {
    // A visitor with the token woke it: the "preview" actor, not berthd's "system".
    woken = woken || (e["type"] == "woken" && e["message"].get<std::string>().find("preview") != std::string::npos &&
                      e["actor"] == "preview");
  }
  CHECK(woken);
  CHECK(Send(Get(host, "/", TokenHeader(token))).status == 200);
}

TEST_CASE("preview: berthd's /mcp preview_url hands out a link that opens exactly that port",
          "[preview][mcp]") {
  Workspace("mcpweb");
  auto api = Berthd().Admin();
  std::string session = testing::McpSession(api);
  json result = testing::McpToolCall(api, session, "preview_url",
                                     {{"workspace", "mcpweb"}, {"port", AppPort()}, {"expires_in", "1h"}});
  INFO(result.dump());
  REQUIRE_FALSE(result.value("isError", false));
  json record = result["structuredContent"];
  std::string token = record["token"];
  CHECK(record["url"] == fmt::format("http://{}-mcpweb.preview.localhost:{}/", AppPort(), BerthdPort()));
  CHECK(result["content"][0]["text"].get<std::string>().starts_with(record["link"].get<std::string>()));
  // The grant is berthd's own: listed by the API, and the link opens the app.
  auto listed = Call(verb::get, "/v1/workspaces/mcpweb/previews");
  REQUIRE(listed["previews"].size() == 1);
  CHECK(listed["previews"][0]["id"] == record["id"]);
  CHECK(Send(Get(Host(AppPort(), "mcpweb"), "/from-mcp", TokenHeader(token))).status == 200);
  CHECK(Send(Get(Host(AppPort() == 65535 ? 1 : AppPort() + 1, "mcpweb"), "/", TokenHeader(token))).status ==
        403);
}

TEST_CASE("preview: a web UI session opens a private port by a pass of that port alone, which ends with the session",
          "[preview][session]") {
  std::string ws = Workspace("pass");
  // Signed in as the web UI is: the key traded for the session cookie and its CSRF token.
  client::ApiClient page(Berthd().daemon().endpoint(), "");
  auto signed_in = page.Request(verb::post, "/v1/sessions", json{{"api_key", Berthd().admin_key()}}.dump(),
                                "application/json");
  REQUIRE(signed_in);
  REQUIRE(signed_in->status == 201);
  std::string set_cookie(signed_in->Header("Set-Cookie"));
  std::string session_cookie = set_cookie.substr(0, set_cookie.find(';'));
  client::Headers as_page = {{"Cookie", session_cookie},
                             {"X-CSRF-Token", json::parse(signed_in->body)["csrf_token"].get<std::string>()}};
  auto open = [&](const std::string& target, const client::Headers& headers) {
    auto r = page.Request(verb::post, target, "", "", headers);
    REQUIRE(r);
    return *r;
  };
  auto opened = open(fmt::format("/v1/workspaces/{}/ports/{}/open", ws, AppPort()), as_page);
  INFO(opened.body);
  REQUIRE(opened.status == 200);
  std::string url = json::parse(opened.body)["url"];
  std::string prefix = fmt::format("http://{}/?berth_preview_token=", Host(AppPort(), "pass"));
  REQUIRE(url.starts_with(prefix));
  std::string pass = url.substr(prefix.size());
  CHECK(pass.starts_with("bps_"));
  CHECK(pass.find(session_cookie.substr(session_cookie.find('=') + 1)) == std::string::npos);

  // The preview host trades the pass for its own cookie and sends the browser to a clean URL;
  // the first opening is on the timeline.
  size_t before = Log().Count();
  auto traded = Send(Get(Host(AppPort(), "pass"), "/?berth_preview_token=" + pass));
  CHECK(traded.status == 303);
  CHECK(traded.Header("location") == "/");
  CHECK(traded.Header("set-cookie").starts_with("berth_preview_token=" + pass + ";"));
  CHECK(Log().Count() == before);
  std::string with_pass = fmt::format("Cookie: app=1; berth_preview_token={}\r\n", pass);
  auto ok = Send(Get(Host(AppPort(), "pass"), "/after", with_pass));
  REQUIRE(ok.status == 200);
  auto seen = ParseJson(ok.body).value();
  CHECK(seen["target"] == "/after");
  CHECK(seen["headers"]["cookie"] == "app=1");  // the pass stays with berthd
  auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events");
  int opened_events = 0;
  for (const auto& e : events["events"]) opened_events += e["type"] == "preview_opened" ? 1 : 0;
  CHECK(opened_events == 1);

  // Exactly that port of that workspace; a forged pass opens nothing; no pass for a key.
  std::string other = Workspace("pass-other");
  CHECK(Send(Get(Host(AppPort() == 65535 ? 1 : AppPort() + 1, "pass"), "/", with_pass)).status == 403);
  CHECK(Send(Get(Host(AppPort(), other), "/", with_pass)).status == 403);
  std::string forged = pass;
  forged.back() = forged.back() == '0' ? '1' : '0';
  CHECK(Send(Get(Host(AppPort(), "pass"), "/", TokenHeader(forged))).status == 401);
  std::string moved = pass;  // another workspace's id under this pass's signature
  moved.replace(moved.find(ws), ws.size(), other);
  CHECK(Send(Get(Host(AppPort(), other), "/", TokenHeader(moved))).status == 401);
  auto by_key = Berthd().Admin().Request(verb::post, fmt::format("/v1/workspaces/{}/ports/{}/open", ws, AppPort()));
  REQUIRE(by_key);
  CHECK(by_key->status == 400);
  CHECK(open(fmt::format("/v1/workspaces/{}/ports/0/open", ws), as_page).status == 400);
  CHECK(open(fmt::format("/v1/workspaces/{}/ports/080/open", ws), as_page).status == 400);
  // Without the CSRF token, a signed-in POST is refused (another site's form cannot mint one).
  CHECK(open(fmt::format("/v1/workspaces/{}/ports/{}/open", ws, AppPort()), {{"Cookie", session_cookie}}).status ==
        403);

  // Signing out ends the pass at once.
  auto out = page.Request(verb::delete_, "/v1/sessions/current", "", "", as_page);
  REQUIRE(out);
  CHECK(out->status == 204);
  auto after = Send(Get(Host(AppPort(), "pass"), "/", with_pass));
  CHECK(after.status == 401);
  CHECK(after.body.find("session") != std::string::npos);
  // And a stopped workspace stays stopped for a pass whose session has ended.
  Call(verb::post, "/v1/workspaces/" + ws + "/stop");
  Call(verb::post, "/v1/workspaces/" + ws + "/wait", json{{"state", "stopped"}, {"timeout_s", 60}});
  CHECK(Send(Get(Host(AppPort(), "pass"), "/", with_pass)).status == 401);
  CHECK(State(ws) == "stopped");
}

}  // namespace berth
