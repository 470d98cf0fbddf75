// berthd in-process over real HTTP, on libvirt's test driver with a real berth-agent per
// workspace as a host process (the unix transport): the API, tenancy, wake on request,
// hibernate, idle stop and restart recovery, end to end without booting a VM.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/client/exec.h"
#include "common/client/files.h"
#include "common/client/tunnel.h"
#include "controller/workspace/service.h"
#include "tests/support/test_berthd.h"
#include "tests/integration/ports_tunnel_test_util.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using testing::TestBerthd;
using testing::WaitFor;

// One daemon for the whole file: starting one is cheap, but sharing it also checks that
// workspaces of different tests do not disturb each other.
TestBerthd& Berthd() {
  static TestBerthd berthd;
  return berthd;
}

json Create(client::ApiClient& api, json body, int wait_s = 30) {
  auto made = api.Json(verb::post, "/v1/workspaces", body);
  REQUIRE(made.has_value());
  json wait = {{"state", "running"}, {"timeout_s", wait_s}};
  auto running = api.Json(verb::post, "/v1/workspaces/" + (*made)["id"].get<std::string>() + "/wait", wait);
  INFO((running ? running->dump() : running.error().message));
  REQUIRE(running.has_value());
  return *running;
}

std::string State(client::ApiClient& api, const std::string& id) {
  auto ws = api.Json(verb::get, "/v1/workspaces/" + id);
  return ws ? (*ws)["state"].get<std::string>() : "error: " + ws.error().message;
}

std::vector<std::string> EventTypes(client::ApiClient& api, const std::string& id) {
  auto events = api.Json(verb::get, "/v1/workspaces/" + id + "/events?limit=1000");
  std::vector<std::string> out;
  if (events) {
    for (const auto& e : (*events)["events"]) out.push_back(e["type"].get<std::string>());
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST_CASE("berthd: health, keys and scopes", "[berthd]") {
  auto& d = Berthd();
  auto anon = d.WithKey("");
  auto health = anon.Json(verb::get, "/v1/health");
  REQUIRE(health.has_value());
  CHECK((*health)["status"] == "ok");

  auto denied = anon.Json(verb::get, "/v1/workspaces");
  REQUIRE_FALSE(denied.has_value());
  CHECK(denied.error().code == ErrorCode::kUnauthenticated);
  auto wrong = d.WithKey("bk_" + std::string(64, '0')).Json(verb::get, "/v1/workspaces");
  REQUIRE_FALSE(wrong.has_value());
  CHECK(wrong.error().code == ErrorCode::kUnauthenticated);

  auto admin = d.Admin();
  auto me = admin.Json(verb::get, "/v1/me");
  REQUIRE(me.has_value());
  CHECK((*me)["key"]["scope"] == "operator");  // berthd's first key
  CHECK((*me)["tenant"]["name"] == "default");

  // The admin key file is the owner's alone.
  struct stat st {};
  REQUIRE(stat(d.daemon().admin_key_file().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  json read_req = {{"scope", "read"}, {"name", "ro"}};
  auto read_key = admin.Json(verb::post, "/v1/keys", read_req);
  REQUIRE(read_key.has_value());
  std::string secret = (*read_key)["key"];
  CHECK(secret.starts_with("bk_"));
  auto reader = d.WithKey(secret);
  CHECK(reader.Json(verb::get, "/v1/workspaces").has_value());
  json ws_req = {{"name", "not-allowed"}};
  auto refused = reader.Json(verb::post, "/v1/workspaces", ws_req);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::kPermissionDenied);
  auto no_admin = reader.Json(verb::get, "/v1/keys");
  REQUIRE_FALSE(no_admin.has_value());
  CHECK(no_admin.error().code == ErrorCode::kPermissionDenied);

  // The key list shows prefixes, never keys or hashes.
  auto keys = admin.Json(verb::get, "/v1/keys");
  REQUIRE(keys.has_value());
  CHECK(keys->dump().find(secret) == std::string::npos);
  CHECK(keys->dump().find(secret.substr(0, 11)) != std::string::npos);

  // Revoked: refused at once.
  auto revoked = admin.Request(verb::delete_, "/v1/keys/" + (*read_key)["id"].get<std::string>());
  REQUIRE(revoked.has_value());
  CHECK(revoked->status == 204);
  auto after = reader.Json(verb::get, "/v1/workspaces");
  REQUIRE_FALSE(after.has_value());
  CHECK(after.error().code == ErrorCode::kUnauthenticated);
}

TEST_CASE("berthd: create validates, is idempotent, and names are unique per tenant", "[berthd]") {
  auto api = Berthd().Admin();
  // Each refusal with its own code: a bad request is the caller's mistake (400), an image that
  // is not built is the host's state (409).
  std::vector<std::pair<json, ErrorCode>> refusals = {
      {json{{"name", "Bad Name"}}, ErrorCode::kInvalidArgument},
      {json{{"name", "x"}, {"size", "huge"}}, ErrorCode::kInvalidArgument},
      {json{{"name", "x"}, {"surprise", 1}}, ErrorCode::kInvalidArgument},
      {json{{"name", "x"}, {"image", "nope"}}, ErrorCode::kFailedPrecondition},
      {json{{"name", "x"}, {"idle_timeout", 1}}, ErrorCode::kInvalidArgument},
      {json::array(), ErrorCode::kInvalidArgument}};
  for (const auto& [bad, code] : refusals) {
    auto r = api.Json(verb::post, "/v1/workspaces", bad);
    INFO(bad.dump() << (r ? "" : " -> " + r.error().message));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == code);
  }
  json body = {{"name", "idem"}, {"labels", {{"team", "a"}}}};
  client::Headers idem = {{"Idempotency-Key", "create-idem-1"}};
  auto first = api.Json(verb::post, "/v1/workspaces", body, idem);
  REQUIRE(first.has_value());
  auto again = api.Json(verb::post, "/v1/workspaces", body, idem);
  REQUIRE(again.has_value());
  CHECK((*again)["id"] == (*first)["id"]);
  auto dup = api.Json(verb::post, "/v1/workspaces", body);
  REQUIRE_FALSE(dup.has_value());
  CHECK(dup.error().code == ErrorCode::kAlreadyExists);

  auto by_label = api.Json(verb::get, "/v1/workspaces?label=team=a");
  REQUIRE(by_label.has_value());
  REQUIRE((*by_label)["workspaces"].size() == 1);
  CHECK((*by_label)["workspaces"][0]["name"] == "idem");

  json patch = {{"idle_timeout", 600}, {"labels", {{"team", "b"}}}};
  auto patched = api.Json(verb::patch, "/v1/workspaces/idem", patch);
  REQUIRE(patched.has_value());
  CHECK((*patched)["idle_timeout"] == 600);
  CHECK((*patched)["labels"]["team"] == "b");

  auto deleted = api.Json(verb::delete_, "/v1/workspaces/idem");
  REQUIRE(deleted.has_value());
  CHECK(WaitFor([&] { return State(api, (*first)["id"]).starts_with("error: no workspace"); },
                std::chrono::seconds(20)));
  CHECK_FALSE(std::filesystem::exists(Berthd().data_dir() / "workspaces" / (*first)["id"].get<std::string>()));
}

TEST_CASE("berthd: exec, files and sessions stream through to the agent", "[berthd]") {
  auto api = Berthd().Admin();
  auto ws = Create(api, {{"name", "through"}});
  std::string id = ws["id"];
  std::string scope = "/v1/workspaces/through";  // by name works as well as by id
  CHECK(ws["state"] == "running");
  CHECK(ws["transport"] == "unix");

  protocol::ExecRequest req;
  req.cmd = std::string("echo out; echo err >&2; exit 3");
  auto result = client::Exec(api, scope, req);
  REQUIRE(result.has_value());
  CHECK(result->stdout_data == "out\n");
  CHECK(result->stderr_data == "err\n");
  CHECK(result->exit.exit_code == 3);

  // NDJSON streaming arrives event by event.
  std::vector<protocol::ExecEvent::Type> kinds;
  protocol::ExecRequest stream_req;
  stream_req.cmd = std::string("for i in 1 2 3; do echo $i; done");
  auto streamed = client::ExecStream(api, scope, stream_req, [&](const protocol::ExecEvent& e) {
    kinds.push_back(e.type);
    return Status{};
  });
  REQUIRE(streamed.has_value());
  CHECK(streamed->exit_code == 0);
  CHECK(std::count(kinds.begin(), kinds.end(), protocol::ExecEvent::Type::kStart) == 1);
  CHECK(std::count(kinds.begin(), kinds.end(), protocol::ExecEvent::Type::kStdout) >= 1);

  // Files both ways, 8 MiB, through the proxy.
  testing::TempDir tmp;
  std::string big(8 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) >> 5);
  std::ofstream(tmp / "big.bin", std::ios::binary) << big;
  auto dir = std::filesystem::path(Berthd().data_dir() / "workspaces" / id / "guest");
  auto up = client::UploadFile(api, scope, tmp / "big.bin", (dir / "big.bin").string());
  REQUIRE(up.has_value());
  CHECK(up->size == big.size());
  REQUIRE(client::DownloadFile(api, scope, (dir / "big.bin").string(), tmp / "back.bin").has_value());
  std::ifstream back(tmp / "back.bin", std::ios::binary);
  std::string got((std::istreambuf_iterator<char>(back)), std::istreambuf_iterator<char>());
  CHECK(got == big);
  auto missing = client::Stat(api, scope, (dir / "nope").string());
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::kNotFound);

  // An interactive PTY session over the WebSocket, through berthd.
  protocol::SessionStart start;
  start.cmd = std::vector<std::string>{"/bin/sh", "-c", "stty size; read line; echo got:$line"};
  start.pty = protocol::PtySize{100, 30};
  auto session = client::OpenSession(api, scope, start);
  REQUIRE(session.has_value());
  REQUIRE((*session)->WriteStdin("hello\n").has_value());
  std::string out;
  auto end = (*session)->WaitEnd(std::chrono::seconds(10), &out);
  REQUIRE(end.has_value());
  CHECK(out.find("30 100") != std::string::npos);
  CHECK(out.find("got:hello") != std::string::npos);

  // While a stream is open the workspace says why it is awake.
  protocol::ExecRequest slow;
  slow.cmd = std::string("sleep 2");
  std::thread t([&] { (void)client::Exec(api, scope, slow); });
  CHECK(WaitFor([&] {
    auto now = api.Json(verb::get, "/v1/workspaces/" + id);
    return now && now->contains("awake") && !(*now)["awake"]["reasons"].empty();
  }));
  t.join();

  // Agent errors keep their status; unknown agent routes are berthd's 404.
  auto nowhere = api.Request(verb::get, scope + "/nowhere");
  REQUIRE(nowhere.has_value());
  CHECK(nowhere->status == 404);
}

TEST_CASE("berthd: a workspace's env reaches execs and sessions, under their own", "[berthd]") {
  auto api = Berthd().Admin();
  Create(api, {{"name", "with-env"}, {"env", {{"GREETING", "hello world"}, {"BOTH", "workspace"}}}});
  std::string scope = "/v1/workspaces/with-env";

  protocol::ExecRequest req;
  req.cmd = std::string("echo \"$GREETING|$BOTH\"");
  req.env["BOTH"] = "exec";
  auto result = client::Exec(api, scope, req);
  REQUIRE(result.has_value());
  CHECK(result->stdout_data == "hello world|exec\n");

  // An interactive session gets it too (a shell, as `berth shell` opens).
  protocol::SessionStart start;
  start.cmd = std::string("echo \"$GREETING|$BOTH\"");
  start.pty = protocol::PtySize{80, 24};
  auto session = client::OpenSession(api, scope, start);
  REQUIRE(session.has_value());
  std::string out;
  auto end = (*session)->WaitEnd(std::chrono::seconds(10), &out);
  REQUIRE(end.has_value());
  CHECK(out.find("hello world|workspace") != std::string::npos);

  // A workspace's env changed by PATCH applies to the next exec.
  REQUIRE(api.Json(verb::patch, scope, json{{"env", {{"GREETING", "changed"}}}}).has_value());
  req.env.clear();
  result = client::Exec(api, scope, req);
  REQUIRE(result.has_value());
  CHECK(result->stdout_data == "changed|\n");
  // The event names the variables but keeps their values out of the log.
  auto events = api.Json(verb::get, scope + "/events?limit=1000");
  REQUIRE(events.has_value());
  CHECK(events->dump().find("GREETING") != std::string::npos);
  CHECK(events->dump().find("changed") == std::string::npos);

  auto too_big = api.Json(verb::patch, scope, json{{"env", {{"BIG", std::string(13 * 1024, 'x')}}}});
  REQUIRE_FALSE(too_big.has_value());
  CHECK(too_big.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("berthd: tunnels to a guest port, raw and WebSocket, through berthd", "[berthd]") {
  auto api = Berthd().Admin();
  Create(api, {{"name", "tunneled"}});
  std::string scope = "/v1/workspaces/tunneled";
  {
    // Raw: HTTP upgrade to a byte pipe; berthd passes the 101 and the bytes through.
    ports_test::EchoServer echo;
    auto fd = tunnel::OpenRawTunnel(api, scope, echo.listener.port);
    REQUIRE(fd.has_value());
    std::string payload = ports_test::RandomBytes(1 << 20);
    std::thread writer([&] {
      for (size_t off = 0; off < payload.size();) {
        ssize_t w = write(fd->get(), payload.data() + off, payload.size() - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      shutdown(fd->get(), SHUT_WR);
    });
    std::string back;
    char buf[65536];
    for (;;) {
      ssize_t n = read(fd->get(), buf, sizeof buf);
      if (n <= 0) break;
      back.append(buf, static_cast<size_t>(n));
    }
    writer.join();
    CHECK(back.size() == payload.size());
    CHECK(ports_test::Sha256(back) == ports_test::Sha256(payload));
  }
  {
    // WebSocket: frames end to end between the client and the agent.
    ports_test::EchoServer echo;
    auto ws = tunnel::OpenTunnel(api, scope, echo.listener.port);
    REQUIRE(ws.has_value());
    REQUIRE((*ws)->SendBinary("ping through berthd").has_value());
    std::string got;
    while (got.size() < 19) {
      auto frame = (*ws)->Read(std::chrono::seconds(10));
      REQUIRE(frame.has_value());
      got += frame->data;
    }
    CHECK(got == "ping through berthd");
  }
  // A port where nothing listens: the agent's JSON error, passed through before any upgrade.
  ports_test::Listener closed;
  uint16_t dead = closed.port;
  close(closed.fd);
  closed.fd = -1;
  auto refused = tunnel::OpenRawTunnel(api, scope, dead);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::kUnavailable);
}

TEST_CASE("berthd: tenants cannot see each other's workspaces", "[berthd]") {
  auto& d = Berthd();
  auto admin = d.Admin();
  json tenant_req = {{"name", "other-tenant"}};
  auto tenant = admin.Json(verb::post, "/v1/tenants", tenant_req);
  REQUIRE(tenant.has_value());
  json key_req = {{"tenant", "other-tenant"}, {"scope", "write"}};
  auto key = admin.Json(verb::post, "/v1/keys", key_req);
  REQUIRE(key.has_value());
  auto other = d.WithKey((*key)["key"]);

  auto mine = Create(admin, {{"name", "private"}});
  std::string id = mine["id"];
  for (const auto& ref : {id, std::string("private")}) {
    std::string base = "/v1/workspaces/" + ref;
    std::vector<std::pair<verb, std::string>> calls = {
        {verb::get, base},           {verb::patch, base},          {verb::delete_, base},
        {verb::post, base + "/start"}, {verb::post, base + "/stop"}, {verb::post, base + "/hibernate"},
        {verb::post, base + "/exec"},  {verb::get, base + "/files/etc/hostname"},
        {verb::get, base + "/ports"},  {verb::get, base + "/events"}, {verb::get, base + "/processes"}};
    for (const auto& [method, target] : calls) {
      auto r = other.Request(method, target, method == verb::get || method == verb::delete_ ? "" : "{}",
                             "application/json");
      INFO(target);
      REQUIRE(r.has_value());
      CHECK(r->status == 404);
    }
  }
  auto list = other.Json(verb::get, "/v1/workspaces");
  REQUIRE(list.has_value());
  CHECK((*list)["workspaces"].empty());
  // The other tenant may use the same name: names are unique per tenant only.
  auto same_name = other.Json(verb::post, "/v1/workspaces", json{{"name", "private"}});
  REQUIRE(same_name.has_value());
  CHECK(State(admin, id) == "running");
}

TEST_CASE("berthd: stop, wake on request, hibernate keeps processes", "[berthd]") {
  auto api = Berthd().Admin();
  auto ws = Create(api, {{"name", "sleeper"}});
  std::string id = ws["id"];
  std::string scope = "/v1/workspaces/" + id;

  auto stop = api.Json(verb::post, scope + "/stop", json::object());
  REQUIRE(stop.has_value());
  REQUIRE(WaitFor([&] { return State(api, id) == "stopped"; }, std::chrono::seconds(20)));

  // An exec on a stopped workspace starts it and waits.
  protocol::ExecRequest req;
  req.cmd = std::string("echo awake");
  auto woken = client::Exec(api, scope, req);
  REQUIRE(woken.has_value());
  CHECK(woken->stdout_data == "awake\n");
  CHECK(State(api, id) == "running");
  // The timeline says who woke it (the key whose exec did, the one that created it) and how.
  {
    auto events = api.Json(verb::get, "/v1/workspaces/" + id + "/events?limit=1000");
    REQUIRE(events.has_value());
    json created, woken_event;
    for (const auto& e : (*events)["events"]) {
      if (e["type"] == "created") created = e;
      if (e["type"] == "woken") woken_event = e;
    }
    REQUIRE(woken_event.is_object());
    CHECK(woken_event["actor"].get<std::string>().starts_with("key_"));
    CHECK(woken_event["actor"] == created["actor"]);
    CHECK(woken_event["message"].get<std::string>().find("(exec)") != std::string::npos);
  }

  // With auto_start off, a stopped workspace says so instead of waking.
  REQUIRE(api.Json(verb::patch, scope, json{{"auto_start", false}}).has_value());
  REQUIRE(api.Json(verb::post, scope + "/stop", json::object()).has_value());
  REQUIRE(WaitFor([&] { return State(api, id) == "stopped"; }, std::chrono::seconds(20)));
  auto refused = client::Exec(api, scope, req);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::kFailedPrecondition);
  CHECK(refused.error().message.find("auto_start") != std::string::npos);

  // Hibernate with a background process; it is still there after the resume.
  REQUIRE(api.Json(verb::post, scope + "/start", json::object()).has_value());
  REQUIRE(api.Json(verb::post, scope + "/wait", json{{"state", "running"}}).has_value());
  protocol::ExecRequest bg;
  bg.cmd = std::string("sleep 300");
  bg.background = true;
  bg.tag = "long";
  auto started = client::StartBackground(api, scope, bg);
  REQUIRE(started.has_value());
  REQUIRE(api.Json(verb::post, scope + "/hibernate", json::object()).has_value());
  REQUIRE(WaitFor([&] { return State(api, id) == "hibernated"; }, std::chrono::seconds(20)));
  REQUIRE(api.Json(verb::post, scope + "/start", json::object()).has_value());
  REQUIRE(api.Json(verb::post, scope + "/wait", json{{"state", "running"}}).has_value());
  auto proc = client::GetProcess(api, scope, "long");
  REQUIRE(proc.has_value());
  CHECK(proc->pid == started->pid);
  CHECK(proc->running);
  auto types = EventTypes(api, id);
  CHECK(Has(types, "hibernated"));
  CHECK(Has(types, "stopped"));

  // Hibernating what is not running is a clear 409.
  REQUIRE(api.Json(verb::post, scope + "/stop", json{{"force", true}}).has_value());
  REQUIRE(WaitFor([&] { return State(api, id) == "stopped"; }, std::chrono::seconds(20)));
  auto bad = api.Json(verb::post, scope + "/hibernate", json::object());
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code == ErrorCode::kFailedPrecondition);

  // Usage counted the seconds it ran.
  auto usage = api.Json(verb::get, "/v1/usage");
  REQUIRE(usage.has_value());
  bool found = false;
  for (const auto& row : (*usage)["workspaces"]) {
    if (row["workspace"] == id) found = true;
  }
  CHECK(found);
}

TEST_CASE("berthd: an idle workspace stops itself and a request wakes it", "[berthd]") {
  auto api = Berthd().Admin();
  auto ws = Create(api, {{"name", "idler"}, {"idle_timeout", 10}});
  std::string id = ws["id"];
  CHECK(ws["awake"]["idle_at"].is_string());
  REQUIRE(WaitFor([&] { return State(api, id) == "stopped"; }, std::chrono::seconds(40)));
  CHECK(Has(EventTypes(api, id), "stopped_by_idle"));
  protocol::ExecRequest req;
  req.cmd = std::string("true");
  auto woken = client::Exec(api, "/v1/workspaces/" + id, req);
  REQUIRE(woken.has_value());
  CHECK(State(api, id) == "running");
}

TEST_CASE("berthd: events can be followed live, the whole backlog first however small the page", "[berthd]") {
  auto api = Berthd().Admin();
  auto ws = Create(api, {{"name", "followed"}});
  std::string id = ws["id"];
  std::vector<std::string> seen;
  std::mutex mutex;
  std::thread follower([&] {
    auto follow = Berthd().Admin();
    client::NdjsonSplitter lines([&](const json& line) -> Status {
      std::lock_guard lock(mutex);
      seen.push_back(line.value("type", ""));
      if (seen.back() == "stopped") return Fail(ErrorCode::kAlreadyExists, "seen enough");
      return {};
    });
    // A page of 2: the backlog (created, starting, started, ...) is longer, and all of it
    // comes before the live events.
    (void)follow.Stream(verb::get, "/v1/workspaces/" + id + "/events?follow=1&limit=2", {}, nullptr,
                        std::nullopt, [&](std::string_view data) { return lines.Feed(data); });
  });
  // The backlog first (created ... started), then what happens from now on.
  REQUIRE(WaitFor([&] {
    std::lock_guard lock(mutex);
    return std::find(seen.begin(), seen.end(), "started") != seen.end();
  }));
  REQUIRE(api.Json(verb::post, "/v1/workspaces/" + id + "/stop", json::object()).has_value());
  follower.join();
  std::lock_guard lock(mutex);
  CHECK(seen.front() == "created");
  CHECK(std::find(seen.begin(), seen.end(), "stopping") != seen.end());
  CHECK(seen.back() == "stopped");
  // Nothing skipped: exactly the timeline up to "stopped".
  auto all = api.Json(verb::get, "/v1/workspaces/" + id + "/events?limit=1000");
  REQUIRE(all.has_value());
  std::vector<std::string> timeline;
  for (const auto& e : (*all)["events"]) {
    timeline.push_back(e["type"]);
    if (timeline.back() == "stopped") break;
  }
  CHECK(seen == timeline);
}

TEST_CASE("berthd: a restarted berthd reconciles and keeps every workspace", "[berthd][restart]") {
  TestBerthd d;
  auto api = d.Admin();
  auto ws = Create(api, {{"name", "survivor"}});
  std::string id = ws["id"];
  auto stopped = Create(api, {{"name", "resting"}});
  REQUIRE(api.Json(verb::post, "/v1/workspaces/resting/stop", json::object()).has_value());
  REQUIRE(WaitFor([&] { return State(api, "resting") == "stopped"; }, std::chrono::seconds(20)));

  d.Restart();
  api = d.Admin();
  CHECK(State(api, id) == "running");
  CHECK(State(api, "resting") == "stopped");
  protocol::ExecRequest req;
  req.cmd = std::string("echo still");
  auto r = client::Exec(api, "/v1/workspaces/" + id, req);
  REQUIRE(r.has_value());
  CHECK(r->stdout_data == "still\n");
  CHECK(std::filesystem::exists(d.data_dir() / "workspaces" / id / "data.qcow2"));
}

}  // namespace
}  // namespace berth
