// The web UI's side of berthd: sign-in sessions (a cookie the page cannot read, CSRF and
// Origin checks, sign-out, revocation and expiry), the live list of workspaces as server-sent
// events, and the UI's files under "/" (caching, the content security policy, path checks).
#include <atomic>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "common/random.h"
#include "tests/support/raw_http.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_berthd.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using testing::TestBerthd;

std::atomic<int64_t> g_now{1'900'000'000};

testing::TempDir& WebRoot() {
  static testing::TempDir dir;
  return dir;
}

// One daemon for the file, with a clock the tests move and a built UI of its own.
TestBerthd& Berthd() {
  static TestBerthd berthd([](Config& c) {
    c.sessions.idle_timeout = std::chrono::seconds(3600);
    c.sessions.max_age = std::chrono::seconds(4 * 3600);
    c.sessions.clock_for_test = [] { return g_now.load(); };
    c.web_root = WebRoot().path();
  });
  return berthd;
}

client::ApiClient Anonymous() { return client::ApiClient(Berthd().daemon().endpoint(), ""); }

std::string Host() {
  const auto& e = Berthd().daemon().endpoint();
  return fmt::format("{}:{}", e.host, e.port);
}

// A key of `scope` in the default tenant.
std::string MintKey(const std::string& scope) {
  auto made = Berthd().Admin().Json(verb::post, "/v1/keys", json{{"scope", scope}});
  REQUIRE(made);
  return (*made)["key"].get<std::string>();
}

struct SignedIn {
  std::string cookie;  // "berth_session=…", as a browser sends it back
  std::string csrf;
  json body;
};

SignedIn SignIn(const std::string& key) {
  auto res = Anonymous().Request(verb::post, "/v1/sessions", json{{"api_key", key}}.dump(),
                                 "application/json");
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == 201);
  std::string set_cookie(res->Header("Set-Cookie"));
  auto semi = set_cookie.find(';');
  SignedIn out{set_cookie.substr(0, semi), "", json::parse(res->body)};
  out.csrf = out.body["csrf_token"];
  return out;
}

client::Headers Cookie(const SignedIn& s, bool with_csrf = false) {
  client::Headers h = {{"Cookie", "theme=dark; " + s.cookie + "; other=1"}};
  if (with_csrf) h.emplace_back("X-CSRF-Token", s.csrf);
  return h;
}

int StatusOf(const client::Headers& headers, verb method, const std::string& target,
             const std::string& body = {}) {
  auto res = Anonymous().Request(method, target, body, body.empty() ? "" : "application/json", headers);
  REQUIRE(res);
  return res->status;
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("sessions: a key signs in to an HttpOnly SameSite cookie that acts as the key",
          "[sessions]") {
  std::string key = MintKey("write");
  auto res = Anonymous().Request(verb::post, "/v1/sessions", json{{"api_key", key}}.dump(),
                                 "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 201);
  std::string set_cookie(res->Header("Set-Cookie"));
  CHECK(set_cookie.starts_with("berth_session=bs_"));
  CHECK(set_cookie.find("; HttpOnly") != std::string::npos);
  CHECK(set_cookie.find("; SameSite=Strict") != std::string::npos);
  CHECK(set_cookie.find("; Path=/") != std::string::npos);
  CHECK(set_cookie.find("; Max-Age=14400") != std::string::npos);  // max_age: 4 h
  CHECK(res->Header("Cache-Control") == "no-store");
  auto body = json::parse(res->body);
  std::string secret = set_cookie.substr(14, set_cookie.find(';') - 14);
  // The page gets what it shows and the CSRF token, never the cookie's secret or the key.
  CHECK(res->body.find(secret) == std::string::npos);
  CHECK(res->body.find(key) == std::string::npos);
  CHECK(body["key"]["scope"] == "write");
  CHECK(body["tenant"]["name"] == "default");
  CHECK(body["csrf_token"].get<std::string>().size() >= 32);

  SignedIn s{set_cookie.substr(0, set_cookie.find(';')), body["csrf_token"], body};
  auto me = Anonymous().Json(verb::get, "/v1/me", std::nullopt, Cookie(s));
  REQUIRE(me);
  CHECK((*me)["key"]["id"] == body["key"]["id"]);
  auto current = Anonymous().Json(verb::get, "/v1/sessions/current", std::nullopt, Cookie(s));
  REQUIRE(current);
  CHECK((*current)["id"] == body["id"]);
  CHECK((*current)["csrf_token"] == s.csrf);

  // A key is still a key: no session there.
  CHECK(StatusOf({{"Authorization", "Bearer " + key}}, verb::get, "/v1/sessions/current") == 404);
  // Wrong, revoked or missing keys get no cookie.
  for (std::string bad : {std::string("bk_") + RandomHex(32), std::string("")}) {
    auto refused = Anonymous().Request(verb::post, "/v1/sessions", json{{"api_key", bad}}.dump(),
                                       "application/json");
    REQUIRE(refused);
    CHECK(refused->status == (bad.empty() ? 400 : 401));
    CHECK(refused->Header("Set-Cookie").empty());
  }
  CHECK(StatusOf({}, verb::post, "/v1/sessions", R"({"api_key": 7})") == 400);
  CHECK(StatusOf({}, verb::post, "/v1/sessions", std::string(5000, ' ')) == 413);
  // A made-up cookie is no session.
  CHECK(StatusOf({{"Cookie", "berth_session=bs_" + RandomHex(32)}}, verb::get, "/v1/me") == 401);
  CHECK(StatusOf({{"Cookie", "berth_session=x"}}, verb::get, "/v1/me") == 401);
}

TEST_CASE("sessions: a signed-in change needs the CSRF token; a signed-in WebSocket needs berthd's own Origin",
          "[sessions]") {
  auto s = SignIn(MintKey("write"));
  std::string body = json{{"name", "csrf-ws"}}.dump();
  CHECK(StatusOf(Cookie(s), verb::post, "/v1/workspaces", body) == 403);
  auto wrong = Cookie(s);
  wrong.emplace_back("X-CSRF-Token", std::string(s.csrf.size(), 'a'));
  CHECK(StatusOf(wrong, verb::post, "/v1/workspaces", body) == 403);
  // Even with the token, a page of another origin (a preview's) is refused.
  auto other = Cookie(s, true);
  other.emplace_back("Origin", "http://3000-demo.preview.localhost:" + std::to_string(Berthd().daemon().endpoint().port));
  CHECK(StatusOf(other, verb::post, "/v1/workspaces", body) == 403);
  // Reads need no token (a page of another site cannot read the answer).
  CHECK(Anonymous().Json(verb::get, "/v1/workspaces", std::nullopt, Cookie(s)));
  CHECK(StatusOf(Cookie(s, true), verb::post, "/v1/workspaces", body) == 201);
  auto api = Berthd().Admin();
  REQUIRE(api.Json(verb::post, "/v1/workspaces/csrf-ws/wait", json{{"state", "running"}, {"timeout_s", 60}}));

  std::string exec_ws = "/v1/workspaces/csrf-ws/exec/ws";
  for (std::string origin : {std::string(), std::string("http://evil.example"),
                             "http://3000-csrf-ws.preview.localhost:" + std::to_string(Berthd().daemon().endpoint().port)}) {
    INFO("Origin: " << origin);
    auto h = Cookie(s);
    if (!origin.empty()) h.emplace_back("Origin", origin);
    auto refused = Anonymous().OpenWebSocket(exec_ws, h);
    CHECK_FALSE(refused);
  }
  auto h = Cookie(s);
  h.emplace_back("Origin", "http://" + Host());
  auto ws = Anonymous().OpenWebSocket(exec_ws, h);
  INFO((ws ? "" : ws.error().message));
  REQUIRE(ws);
  REQUIRE((*ws)->SendText(R"({"type":"start","cmd":["echo","from-the-page"]})"));
  std::string out;
  for (int i = 0; i < 20 && out.find("from-the-page") == std::string::npos; ++i) {
    auto frame = (*ws)->Read(std::chrono::seconds(10));
    if (!frame) break;
    if (!frame->text && !frame->data.empty()) out += frame->data.substr(1);
  }
  CHECK(out.find("from-the-page") != std::string::npos);
  REQUIRE(api.Request(verb::delete_, "/v1/workspaces/csrf-ws"));
}

TEST_CASE("sessions: sign-out, revoking the session or its key, and expiry end a session at once",
          "[sessions]") {
  std::string key = MintKey("write");
  auto a = SignIn(key);
  auto b = SignIn(key);
  auto c = SignIn(key);
  // Sign-out needs the token too (a cross-site page must not sign a person out), then clears
  // the cookie and ends the session.
  CHECK(StatusOf(Cookie(a), verb::delete_, "/v1/sessions/current") == 403);
  auto out = Anonymous().Request(verb::delete_, "/v1/sessions/current", {}, {}, Cookie(a, true));
  REQUIRE(out);
  CHECK(out->status == 204);
  CHECK(out->Header("Set-Cookie").starts_with("berth_session=; Path=/; Max-Age=0"));
  CHECK(StatusOf(Cookie(a), verb::get, "/v1/me") == 401);
  CHECK(StatusOf(Cookie(b), verb::get, "/v1/me") == 200);

  // A write key lists and ends its own sessions; an admin its tenant's; another tenant's is
  // not there.
  auto listed = Anonymous().Json(verb::get, "/v1/sessions", std::nullopt, Cookie(b));
  REQUIRE(listed);
  CHECK((*listed)["sessions"].size() == 2);  // b and c
  std::string other_tenant_key;
  {
    auto op = Berthd().Admin();
    REQUIRE(op.Json(verb::post, "/v1/tenants", json{{"name", "sessions-other"}}));
    auto k = op.Json(verb::post, "/v1/keys", json{{"tenant", "sessions-other"}, {"scope", "admin"}});
    REQUIRE(k);
    other_tenant_key = (*k)["key"];
  }
  auto stranger = SignIn(other_tenant_key);
  CHECK(StatusOf(Cookie(stranger, true), verb::delete_, "/v1/sessions/" + b.body["id"].get<std::string>()) == 404);
  CHECK(StatusOf(Cookie(b), verb::get, "/v1/me") == 200);
  CHECK(StatusOf(Cookie(b, true), verb::delete_, "/v1/sessions/" + c.body["id"].get<std::string>()) == 204);
  CHECK(StatusOf(Cookie(c), verb::get, "/v1/me") == 401);

  // Revoking the key ends its sessions at once (no cache outlives it).
  CHECK(StatusOf(Cookie(b), verb::get, "/v1/me") == 200);
  auto op = Berthd().Admin();
  REQUIRE(op.Request(verb::delete_, "/v1/keys/" + b.body["key"]["id"].get<std::string>()));
  CHECK(StatusOf(Cookie(b), verb::get, "/v1/me") == 401);

  // Idle: an hour without use ends it; use keeps it going, up to its absolute expiry.
  std::string key2 = MintKey("read");
  auto idle = SignIn(key2);
  auto busy = SignIn(key2);
  CHECK(StatusOf(Cookie(idle), verb::get, "/v1/me") == 200);
  for (int i = 0; i < 7; ++i) {
    g_now += 1800;  // half the idle timeout
    INFO("after " << (i + 1) * 1800 << " s");
    CHECK(StatusOf(Cookie(busy), verb::get, "/v1/me") == 200);
  }
  auto gone = Anonymous().Request(verb::get, "/v1/me", {}, {}, Cookie(idle));
  REQUIRE(gone);
  CHECK(gone->status == 401);
  CHECK(gone->body.find("without use") != std::string::npos);
  g_now += 1800;  // 4 h since sign-in: used 30 min ago, but at its absolute expiry
  CHECK(StatusOf(Cookie(busy), verb::get, "/v1/me") == 401);
  auto expired = Anonymous().Request(verb::get, "/v1/me", {}, {}, Cookie(busy));
  REQUIRE(expired);
  CHECK(expired->body.find("expired") != std::string::npos);
}

// The status of a GET of "/" on a preview host, with `pass` as the preview token header.
int PreviewStatus(const std::string& host_label, const std::string& pass) {
  testing::RawConnection c(Berthd().daemon().endpoint().port);
  REQUIRE(c.ok());
  REQUIRE(c.Send(fmt::format("GET / HTTP/1.1\r\nHost: {}.preview.localhost:{}\r\nX-Berth-Preview-Token: {}\r\n"
                             "X-Berth-Skip-Interstitial: 1\r\nConnection: close\r\n\r\n",
                             host_label, Berthd().daemon().endpoint().port, pass)));
  c.WaitClosed(std::chrono::seconds(20));
  const std::string& got = c.received();
  return got.size() > 12 ? std::stoi(got.substr(9, 3)) : 0;
}

TEST_CASE("sessions: a preview pass opens nothing once its session idles out or its key is revoked; "
          "a malformed one opens nothing", "[sessions][preview]") {
  auto op = Berthd().Admin();
  REQUIRE(op.Json(verb::post, "/v1/workspaces", json{{"name", "passes"}}));
  REQUIRE(op.Json(verb::post, "/v1/workspaces/passes/wait", json{{"state", "running"}, {"timeout_s", 60}}));
  // Port 9 of the workspace: nothing listens there, so an authorised request is the 502 page
  // and a refused one a 401 (or a 403 for a pass of another port).
  auto pass_of = [&](const SignedIn& s, int port) {
    auto r = Anonymous().Request(verb::post, fmt::format("/v1/workspaces/passes/ports/{}/open", port), {}, {},
                                 Cookie(s, true));
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    std::string url = json::parse(r->body)["url"];
    return url.substr(url.find("berth_preview_token=") + 20);
  };
  std::string key = MintKey("read");  // any scope may look at a preview
  auto idle = SignIn(key);
  auto busy = SignIn(key);
  std::string idle_pass = pass_of(idle, 9);
  std::string busy_pass = pass_of(busy, 9);
  CHECK(PreviewStatus("9-passes", idle_pass) == 502);
  CHECK(PreviewStatus("10-passes", idle_pass) == 403);
  // Using the pass is using the session: the busy one outlives the idle timeout; the idle one
  // does not, and neither does its pass.
  for (int i = 0; i < 3; ++i) {
    g_now += 1800;  // half the idle timeout
    CHECK(PreviewStatus("9-passes", busy_pass) == 502);
  }
  CHECK(PreviewStatus("9-passes", idle_pass) == 401);
  CHECK(StatusOf(Cookie(busy), verb::get, "/v1/me") == 200);

  // Revoking the key ends its sessions' passes at once.
  REQUIRE(op.Request(verb::delete_, "/v1/keys/" + busy.body["key"]["id"].get<std::string>()));
  CHECK(PreviewStatus("9-passes", busy_pass) == 401);

  // Malformed: refused as a credential, never looked up as a workspace.
  auto fresh = SignIn(MintKey("read"));
  std::string good = pass_of(fresh, 9);
  CHECK(PreviewStatus("9-passes", good) == 502);
  for (std::string bad : {std::string("bps_"), good.substr(0, good.rfind('.')), good + ".9",
                          good.substr(0, good.size() - 1), good + "0", std::string("bps_a.b.9.") + std::string(64, '0'),
                          std::string("bps_") + std::string(400, 'a')}) {
    INFO(bad);
    CHECK(PreviewStatus("9-passes", bad) == 401);
  }
}

TEST_CASE("sessions: GET /v1/watch/workspaces streams a snapshot, then each change and deletion",
          "[sessions][watch]") {
  auto s = SignIn(MintKey("write"));
  std::string data;
  std::mutex mu;
  std::atomic<bool> done{false};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::string content_type;
  std::thread reader([&] {
    auto status = Anonymous().Stream(
        verb::get, "/v1/watch/workspaces", Cookie(s), {}, 0,
        [&](std::string_view chunk) -> Status {
          std::lock_guard lock(mu);
          data += chunk;
          if (done || std::chrono::steady_clock::now() > deadline) return Fail(ErrorCode::kUnavailable, "done");
          return {};
        },
        [&](const client::Response& r) { content_type = r.Header("Content-Type"); });
    (void)status;
  });
  auto has = [&](const std::string& what) {
    std::lock_guard lock(mu);
    return data.find(what) != std::string::npos;
  };
  REQUIRE(testing::WaitFor([&] { return has("event: snapshot\ndata: {\"workspaces\":"); }, std::chrono::seconds(20)));
  auto api = Berthd().Admin();
  auto made = api.Json(verb::post, "/v1/workspaces", json{{"name", "watched"}});
  REQUIRE(made);
  std::string id = (*made)["id"];
  CHECK(testing::WaitFor([&] { return has("\"state\":\"running\"") && has(id); }, std::chrono::seconds(60)));
  REQUIRE(api.Request(verb::delete_, "/v1/workspaces/watched"));
  CHECK(testing::WaitFor([&] { return has("event: deleted\ndata: {\"id\":\"" + id + "\"}"); }, std::chrono::seconds(60)));
  done = true;
  // The stream ends at the next chunk: a keepalive within 15 s at the latest.
  reader.join();
  CHECK(content_type == "text/event-stream");
  std::lock_guard lock(mu);
  // Every event is one "event:" line, one "data:" line of JSON and a blank line.
  size_t at = data.find("event: workspace\ndata: ");
  REQUIRE(at != std::string::npos);
  auto line_end = data.find('\n', at + 23);
  auto event = json::parse(data.substr(at + 23, line_end - at - 23));
  CHECK(event["id"] == id);
  CHECK(data.substr(line_end, 2) == "\n\n");
}

TEST_CASE("web UI: berthd serves the built files with caching, a strict CSP and no way out of the root",
          "[webui]") {
  auto root = WebRoot().path();
  std::filesystem::create_directories(root / "assets");
  std::ofstream(root / "index.html") << "<!doctype html><title>Berth</title><script type=module src=/assets/app-1a2b.js></script>";
  std::ofstream(root / "assets" / "app-1a2b.js") << "console.log('berth');";
  std::ofstream(root / "assets" / "app-1a2b.js.gz") << "GZIPPED-BYTES";
  std::ofstream(root / "favicon.svg") << "<svg/>";
  std::ofstream(root / ".env") << "SECRET=1";
  testing::TempDir outside;
  std::ofstream(outside.path() / "secret.txt") << "host secret";
  std::filesystem::create_symlink(outside.path() / "secret.txt", root / "assets" / "link.js");
  std::filesystem::create_directory_symlink(outside.path(), root / "escape");
  auto web = Anonymous();

  auto page = web.Request(verb::get, "/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->body == ReadFile(root / "index.html"));
  CHECK(page->Header("Content-Type") == "text/html; charset=utf-8");
  CHECK(page->Header("Cache-Control") == "no-cache");
  std::string csp(page->Header("Content-Security-Policy"));
  CHECK(csp.find("script-src 'self';") != std::string::npos);
  CHECK(csp.find("unsafe-inline'; img") != std::string::npos);  // styles only
  CHECK(csp.find("script-src 'self' 'unsafe") == std::string::npos);
  CHECK(csp.find("frame-ancestors 'none'") != std::string::npos);
  CHECK(page->Header("X-Content-Type-Options") == "nosniff");
  // Revalidation: the same page is a 304.
  std::string etag(page->Header("ETag"));
  REQUIRE_FALSE(etag.empty());
  auto again = web.Request(verb::get, "/", {}, {}, {{"If-None-Match", etag}});
  REQUIRE(again);
  CHECK(again->status == 304);
  CHECK(again->body.empty());

  // The page's own routes are the page, on reload too.
  for (const char* route : {"/w/demo/terminal", "/workspaces", "/w/my.app/files/"}) {
    auto r = web.Request(verb::get, route);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == ReadFile(root / "index.html"));
  }
  auto js = web.Request(verb::get, "/assets/app-1a2b.js");
  REQUIRE(js);
  CHECK(js->status == 200);
  CHECK(js->body == "console.log('berth');");
  CHECK(js->Header("Content-Type") == "text/javascript; charset=utf-8");
  CHECK(js->Header("Cache-Control") == "public, max-age=31536000, immutable");
  auto gz = web.Request(verb::get, "/assets/app-1a2b.js", {}, {}, {{"Accept-Encoding", "br, gzip"}});
  REQUIRE(gz);
  CHECK(gz->body == "GZIPPED-BYTES");
  CHECK(gz->Header("Content-Encoding") == "gzip");
  auto no_gz = web.Request(verb::get, "/assets/app-1a2b.js", {}, {}, {{"Accept-Encoding", "gzip;q=0"}});
  REQUIRE(no_gz);
  CHECK(no_gz->body == "console.log('berth');");
  auto head = web.Request(verb::head, "/favicon.svg");
  REQUIRE(head);
  CHECK(head->status == 200);
  CHECK(head->Header("Content-Length") == "6");
  CHECK(head->body.empty());

  // A missing asset is a 404 (never the page, which a script tag would run); nothing outside
  // the root, no dot file and no symbolic link is served.
  for (const char* bad : {"/assets/missing.js", "/assets/link.js", "/escape/secret.txt", "/.env",
                          "/assets/../../etc/passwd", "/%2e%2e/etc/passwd", "/assets/..%2f..%2fetc%2fpasswd"}) {
    INFO(bad);
    auto r = web.Request(verb::get, bad);
    REQUIRE(r);
    CHECK(r->body.find("host secret") == std::string::npos);
    CHECK(r->body.find("SECRET") == std::string::npos);
    CHECK(r->body.find("root:") == std::string::npos);
    if (std::string_view(bad).starts_with("/assets/") && std::string_view(bad).find("..") == std::string_view::npos) {
      CHECK(r->status == 404);
    }
  }
  // The API is not shadowed by the UI, and the UI is not behind a key.
  CHECK(StatusOf({}, verb::get, "/v1/workspaces") == 401);
  CHECK(StatusOf({}, verb::get, "/v1/nope") == 401);
  CHECK(StatusOf({}, verb::post, "/") != 200);
}

TEST_CASE("web UI: without a built UI, / says how to build it", "[webui]") {
  TestBerthd bare;
  auto r = client::ApiClient(bare.daemon().endpoint(), "").Request(verb::get, "/");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body.find("scripts/setup") != std::string::npos);
  auto other = client::ApiClient(bare.daemon().endpoint(), "").Request(verb::get, "/w/x");
  REQUIRE(other);
  CHECK(other->status == 404);
}

}  // namespace berth
