// berthd's desktop bridge end to end without a VM: berthd in-process (unix transport, libvirt's
// test driver), its VNC sockets pointed (DesktopConfig::vnc_socket_for_test) at a real QEMU
// (no guest: the handshake and real framebuffer updates) or at a recording fake RFB server
// (what reaches the server, byte for byte). Viewers are raw RFB over berthd's WebSocket, as a
// forged viewer would speak it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <future>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/unix_time.h"
#include "common/protocol/exec.h"
#include "common/v1/time.h"
#include "tests/integration/desktop_support.h"
#include "tests/support/mcp_exchange.h"
#include "tests/support/test_berthd.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using namespace std::chrono_literals;
using testing::RfbViewer;

// --- the world ---------------------------------------------------------------------------------

std::mutex sockets_mutex;
std::map<std::string, std::filesystem::path> sockets;  // workspace id -> VNC socket
std::atomic<int64_t> clock_offset{0};                 // added to the desktop's clock

// The guest's clipboard tool, for host agents: the desktop image's contract (`get` prints the
// text, `set` takes stdin; exit 3 while there is no display) on a file beside it. A file named
// `down` beside it plays the display not being up.
std::filesystem::path ClipboardDir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / fmt::format("berth-clipboard-{}", getpid());
    std::filesystem::create_directories(d);
    std::ofstream(d / "clipboard") << "#!/bin/sh\n"
                                      "d=$(dirname \"$0\")\n"
                                      "[ -e \"$d/down\" ] && { echo 'clipboard: the X display :0 is not up' >&2; exit 3; }\n"
                                      "case \"$1\" in get) cat \"$d/text\" 2>/dev/null ;; set) cat > \"$d/text\" ;; *) exit 2 ;; esac\n";
    std::filesystem::permissions(d, std::filesystem::perms::all);
    std::filesystem::permissions(d / "clipboard", std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                                      std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                                      std::filesystem::perms::others_exec);
    return d;
  }();
  return dir;
}

testing::TestBerthd& Berthd() {
  static testing::TestBerthd berthd([](Config& c) {
    c.desktop.vnc_socket_for_test = [](const std::string& id) {
      std::lock_guard lock(sockets_mutex);
      auto it = sockets.find(id);
      return it == sockets.end() ? std::filesystem::path("/nonexistent/vnc.sock") : it->second;
    };
    c.desktop.clock_for_test = [] { return UnixNow() + clock_offset.load(); };
    c.desktop.clipboard_tool = (ClipboardDir() / "clipboard").string();
  });
  return berthd;
}

testing::QemuVnc& Qemu() {
  static testing::QemuVnc qemu;  // fails the test (throws) when QEMU is missing: never skipped
  return qemu;
}

json Call(verb method, const std::string& path, const json& body = json::object()) {
  auto r = Berthd().Admin().Json(method, path, body);
  INFO(path << ": " << (r ? r->dump() : r.error().message));
  REQUIRE(r.has_value());
  return *r;
}

// A running workspace whose VNC socket is `socket`.
std::string Workspace(const std::string& name, const std::filesystem::path& socket) {
  auto ws = Call(verb::post, "/v1/workspaces", json{{"name", name}});
  std::string id = ws["id"];
  Call(verb::post, "/v1/workspaces/" + id + "/wait", json{{"state", "running"}, {"timeout_s", 60}});
  std::lock_guard lock(sockets_mutex);
  sockets[id] = socket;
  return id;
}

uint16_t Port() { return Berthd().daemon().endpoint().port; }
std::string Origin() { return fmt::format("http://127.0.0.1:{}", Port()); }

std::string Ticket(const std::string& ws, const std::string& mode) {
  auto t = Call(verb::post, "/v1/workspaces/" + ws + "/desktop/tickets", json{{"mode", mode}});
  CHECK(t["mode"] == mode);
  CHECK(t["url"].get<std::string>().find("/desktop/vnc?ticket=" + t["ticket"].get<std::string>()) != std::string::npos);
  return t["ticket"];
}

std::string VncTarget(const std::string& ws, const std::string& ticket) {
  return "/v1/workspaces/" + ws + "/desktop/vnc?ticket=" + ticket;
}

// A viewer through a new ticket, past the RFB handshake; its bytes per pixel.
int OpenViewer(RfbViewer& v, const std::string& ws, const std::string& mode, int shared = 1) {
  REQUIRE(v.Open(Port(), VncTarget(ws, Ticket(ws, mode)), Origin()));
  CHECK(v.subprotocol() == "binary");
  int bpp = v.Handshake(shared);
  REQUIRE(bpp > 0);
  return bpp;
}

// What berthd's own RFB client sends before the agent's input: SetEncodings (raw, DesktopSize),
// without which QEMU would read the pointer as relative.
const std::string kAgentEncodings("\x02\x00\x00\x02\x00\x00\x00\x00\xff\xff\xff\x21", 12);
// What it sends after the input, before hanging up (RfbClient::Sync): SetPixelFormat (32 bpp) and
// a non-incremental update of one pixel, whose answer proves the server read everything before
// it. The fake server, like QEMU, drops what it has not read from a client that hung up.
const std::string kAgentSync = std::string("\x00\x00\x00\x00\x20\x18\x00\x01\x00\xff\x00\xff\x00\xff\x10\x08\x00\x00\x00\x00", 20) +
                               std::string("\x03\x00\x00\x00\x00\x00\x00\x01\x00\x01", 10);

client::Headers TicketHeader(const std::string& ticket) {
  return {{"X-Berth-Desktop-Ticket", ticket}};
}

json Control(const std::string& ws) { return Call(verb::get, "/v1/workspaces/" + ws + "/desktop/control"); }

std::vector<std::string> EventTypes(const std::string& ws) {
  auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events?limit=1000");
  std::vector<std::string> out;
  for (const auto& e : events["events"]) out.push_back(e["type"]);
  return out;
}
bool HasEvent(const std::string& ws, const std::string& type) {
  auto types = EventTypes(ws);
  return std::find(types.begin(), types.end(), type) != types.end();
}

}  // namespace

// --- a real RFB server: QEMU ---------------------------------------------------------------------

TEST_CASE("desktop: a viewer completes the RFB handshake with QEMU through berthd and gets updates",
          "[desktop]") {
  std::string ws = Workspace("qemu-screen", Qemu().socket());
  RfbViewer v;
  int bpp = OpenViewer(v, ws, "view");
  CHECK(v.RequestUpdate(8, 8, bpp) >= 1);
  CHECK(v.RequestUpdate(32, 16, bpp) >= 1);
  v.Close();
  REQUIRE(testing::WaitFor([&] { return HasEvent(ws, "desktop_viewer_closed"); }));
  CHECK(HasEvent(ws, "desktop_viewer_opened"));
}

TEST_CASE("desktop: two viewers watch at once, and an exclusive ClientInit disconnects nobody",
          "[desktop]") {
  std::string ws = Workspace("qemu-shared", Qemu().socket());
  RfbViewer first;
  int bpp = OpenViewer(first, ws, "view");
  REQUIRE(first.RequestUpdate(8, 8, bpp) >= 1);
  // The second asks QEMU for the screen to itself (shared flag 0): QEMU would drop the first.
  RfbViewer second;
  int bpp2 = OpenViewer(second, ws, "control", /*shared=*/0);
  REQUIRE(second.RequestUpdate(8, 8, bpp2) >= 1);
  CHECK(first.RequestUpdate(8, 8, bpp) >= 1);
  CHECK(second.RequestUpdate(8, 8, bpp2) >= 1);
}

// --- what reaches the server: the recording fake --------------------------------------------------

TEST_CASE("desktop: the shared flag reaches the server as 1 whatever the viewer sent", "[desktop]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("fake-shared", fake.socket());
  RfbViewer v;
  OpenViewer(v, ws, "view", /*shared=*/0);
  REQUIRE(testing::WaitFor([&] { return fake.client_init(0) >= 0; }));
  CHECK(fake.client_init(0) == 1);
}

TEST_CASE("desktop: a view viewer's raw pointer and key events are dropped, a control viewer's pass "
          "after takeover",
          "[desktop]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("fake-input", fake.socket());
  const std::string setencodings = std::string("\x02\x00\x00\x01\x00\x00\x00\x00", 8);
  std::string marker = testing::UpdateRequest(true, 16, 16);

  RfbViewer viewer;
  OpenViewer(viewer, ws, "view");
  viewer.Send(testing::PointerEvent(1, 5, 5) + testing::KeyEvent(true, 0x61) + testing::KeyEvent(false, 0x61) + marker);
  REQUIRE(testing::WaitFor([&] { return fake.received(0).size() >= setencodings.size() + marker.size(); }));
  CHECK(fake.received(0) == setencodings + marker);

  // A control viewer's input is dropped too while the agent holds control.
  std::string control_ticket = Ticket(ws, "control");
  {
    RfbViewer c2;
    REQUIRE(c2.Open(Port(), VncTarget(ws, control_ticket), Origin()));
    REQUIRE(c2.Handshake(1) > 0);
    c2.Send(testing::PointerEvent(1, 7, 7) + marker);
    size_t conn = fake.connections() - 1;
    REQUIRE(testing::WaitFor([&] { return fake.received(conn).size() >= setencodings.size() + marker.size(); }));
    CHECK(fake.received(conn) == setencodings + marker);

    // A view viewer's ticket cannot take over; the control viewer's can.
    RfbViewer watcher;
    std::string view_ticket = Ticket(ws, "view");
    REQUIRE(watcher.Open(Port(), VncTarget(ws, view_ticket), Origin()));
    auto anon = Berthd().WithKey("");
    auto refused = anon.Request(verb::post, "/v1/workspaces/" + ws + "/desktop/control/takeover", "{}",
                                "application/json", TicketHeader(view_ticket));
    REQUIRE(refused);
    CHECK(refused->status == 403);
    CHECK(Control(ws)["holder"] == "agent");
    auto taken = anon.Request(verb::post, "/v1/workspaces/" + ws + "/desktop/control/takeover",
                              R"({"reason": "captcha"})", "application/json", TicketHeader(control_ticket));
    REQUIRE(taken);
    INFO(taken->body);
    CHECK(taken->status == 200);
    auto state = Control(ws);
    CHECK(state["holder"] == "human");
    CHECK(state["reason"] == "captcha");
    CHECK(state["lease_expires"].is_string());

    std::string click = testing::PointerEvent(1, 9, 9) + testing::PointerEvent(0, 9, 9) + testing::KeyEvent(true, 0x62);
    c2.Send(click + marker);
    std::string want = setencodings + marker + click + marker;
    REQUIRE(testing::WaitFor([&] { return fake.received(conn).size() >= want.size(); }));
    CHECK(fake.received(conn) == want);
    // The view viewer still gains nothing, whoever holds control.
    viewer.Send(testing::PointerEvent(1, 1, 1) + marker);
    REQUIRE(testing::WaitFor([&] { return fake.received(0).size() >= setencodings.size() + 2 * marker.size(); }));
    CHECK(fake.received(0) == setencodings + marker + marker);

    // Hand back: the control viewer's input is dropped again.
    auto released = anon.Request(verb::post, "/v1/workspaces/" + ws + "/desktop/control/release",
                                 R"({"note": "solved"})", "application/json", TicketHeader(control_ticket));
    REQUIRE(released);
    CHECK(released->status == 200);
    CHECK(Control(ws)["holder"] == "agent");
    c2.Send(testing::PointerEvent(1, 3, 3) + marker);
    REQUIRE(testing::WaitFor([&] { return fake.received(conn).size() >= want.size() + marker.size(); }));
    CHECK(fake.received(conn) == want + marker);
  }
  // The timeline has it all, input counted per burst (the burst ends at the release).
  REQUIRE(testing::WaitFor([&] { return HasEvent(ws, "desktop_control_released"); }));
  auto types = EventTypes(ws);
  CHECK(std::find(types.begin(), types.end(), "desktop_control_taken") != types.end());
  CHECK(std::find(types.begin(), types.end(), "desktop_input") != types.end());
  auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events?limit=1000");
  for (const auto& e : events["events"]) {
    if (e["type"] == "desktop_input") {
      CHECK(e["data"]["actor"] == "human");
      CHECK(e["data"]["clicks"] == 1);
      CHECK(e["data"]["keys"] == 1);
    }
  }
}

TEST_CASE("desktop: an unknown client message disconnects the viewer before the server sees it",
          "[desktop]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("fake-unknown", fake.socket());
  RfbViewer v;
  OpenViewer(v, ws, "control");
  v.Send(std::string("\x07\x00\x00\x00", 4));
  CHECK(v.WaitClosed(10));
  REQUIRE(testing::WaitFor([&] { return HasEvent(ws, "desktop_viewer_closed"); }));
  CHECK(fake.received(0) == std::string("\x02\x00\x00\x01\x00\x00\x00\x00", 8));
}

// --- tickets, origins, tenants -------------------------------------------------------------------

TEST_CASE("desktop: a used ticket, an expired ticket and a bad Origin are refused", "[desktop]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("fake-tickets", fake.socket());
  std::string ticket = Ticket(ws, "view");
  {
    RfbViewer v;
    REQUIRE(v.Open(Port(), VncTarget(ws, ticket), Origin()));
  }
  RfbViewer again;
  CHECK_FALSE(again.Open(Port(), VncTarget(ws, ticket), Origin()));
  CHECK(again.status() == 401);

  std::string stale = Ticket(ws, "view");
  clock_offset += 61;
  RfbViewer late;
  CHECK_FALSE(late.Open(Port(), VncTarget(ws, stale), Origin()));
  CHECK(late.status() == 401);
  clock_offset -= 61;

  // A foreign page, or none at all (a ticket is a browser's), is refused, and the ticket with
  // it stays unused: the right page can still open it.
  std::string fresh = Ticket(ws, "view");
  RfbViewer evil;
  CHECK_FALSE(evil.Open(Port(), VncTarget(ws, fresh), "http://evil.example"));
  CHECK(evil.status() == 403);
  RfbViewer bare;
  CHECK_FALSE(bare.Open(Port(), VncTarget(ws, fresh), ""));
  CHECK(bare.status() == 403);
  RfbViewer good;
  CHECK(good.Open(Port(), VncTarget(ws, fresh), Origin()));
  // A key in the Authorization header works without Origin, for non-browser clients.
  RfbViewer keyed;
  CHECK(keyed.Open(Port(), "/v1/workspaces/" + ws + "/desktop/vnc?mode=control", "", Berthd().admin_key()));
  // A ticket of another workspace opens nothing here.
  std::string other_ws = Workspace("fake-tickets-2", fake.socket());
  RfbViewer wrong;
  CHECK_FALSE(wrong.Open(Port(), VncTarget(ws, Ticket(other_ws, "view")), Origin()));
  CHECK(wrong.status() == 401);
}

TEST_CASE("desktop: another tenant's key gets 404 for every desktop route", "[desktop]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("fake-tenant", fake.socket());
  auto admin = Berthd().Admin();
  REQUIRE(admin.Json(verb::post, "/v1/tenants", json{{"name", "desktop-other"}}));
  auto key = admin.Json(verb::post, "/v1/keys", json{{"tenant", "desktop-other"}, {"scope", "write"}});
  REQUIRE(key);
  auto other = Berthd().WithKey((*key)["key"]);
  std::string base = "/v1/workspaces/" + ws + "/desktop";
  for (const auto& [method, target] : std::vector<std::pair<verb, std::string>>{
           {verb::post, base + "/tickets"},
           {verb::get, base + "/control"},
           {verb::post, base + "/control/takeover"},
           {verb::post, base + "/control/release"}}) {
    auto r = other.Request(method, target, R"({"mode": "control"})", "application/json");
    REQUIRE(r);
    INFO(target);
    CHECK(r->status == 404);
  }
  RfbViewer v;
  CHECK_FALSE(v.Open(Port(), base + "/vnc?mode=view", "", (*key)["key"]));
  CHECK(v.status() == 404);
  CHECK(Control(ws)["holder"] == "agent");
}

// --- control leases ------------------------------------------------------------------------------

TEST_CASE("desktop: the agent waits for a release without polling; a lease runs out by itself",
          "[desktop]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("fake-lease", fake.socket());
  RfbViewer v;
  OpenViewer(v, ws, "control");  // keeps the takeover past the viewer grace
  Call(verb::post, "/v1/workspaces/" + ws + "/desktop/control/takeover", json{{"private", true}});
  CHECK(Control(ws)["private"] == true);
  auto waiter = std::async(std::launch::async, [&] {
    return Call(verb::get, "/v1/workspaces/" + ws + "/desktop/control?wait=release&timeout=30s");
  });
  CHECK(waiter.wait_for(500ms) == std::future_status::timeout);  // still held
  clock_offset += 15 * 60 + 1;  // the lease (15 min) runs out; berthd's tick notices
  REQUIRE(waiter.wait_for(20s) == std::future_status::ready);
  clock_offset -= 15 * 60 + 1;
  auto state = waiter.get();
  CHECK(state["holder"] == "agent");
  REQUIRE(testing::WaitFor([&] { return HasEvent(ws, "desktop_control_released"); }));
  auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events?limit=1000");
  bool expired = false;
  for (const auto& e : events["events"]) {
    if (e["type"] == "desktop_control_released") expired = e["data"]["cause"] == "lease_expired";
  }
  CHECK(expired);
}

TEST_CASE("desktop: a page waits for any change of control (?wait=change&revision=N), pushed, not polled; "
          "a stale revision answers at once; a lease of the person's own is kept; a stop ends the wait",
          "[desktop]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("fake-change", fake.socket());
  std::string base = "/v1/workspaces/" + ws + "/desktop/control";
  json now = Control(ws);
  REQUIRE(now["revision"].is_number_unsigned());
  uint64_t seen = now["revision"];
  auto waiter = std::async(std::launch::async, [&] {
    return Call(verb::get, fmt::format("{}?wait=change&revision={}&timeout=30s", base, seen));
  });
  CHECK(waiter.wait_for(500ms) == std::future_status::timeout);  // nothing changed yet
  // The agent asks for help: the page hears of it at once.
  Call(verb::post, base + "/request", json{{"reason", "log in"}});
  REQUIRE(waiter.wait_for(10s) == std::future_status::ready);
  json asked = waiter.get();
  CHECK(asked["request"]["reason"] == "log in");
  CHECK(asked["revision"] != seen);
  // A revision the page no longer holds answers at once with the state now.
  json stale = Call(verb::get, fmt::format("{}?wait=change&revision={}&timeout=30s", base, seen));
  CHECK(stale["revision"] == asked["revision"]);
  // A takeover with a lease of its own: lease_expires that far off; too long a lease is a 400.
  json taken = Call(verb::post, base + "/takeover", json{{"lease_s", 120}});
  CHECK(taken["revision"] != asked["revision"]);
  CHECK(v1::ParseTime(taken["lease_expires"].get<std::string>()).value() -
            v1::ParseTime(taken["since"].get<std::string>()).value() == 120);
  Call(verb::post, base + "/release", json::object());
  for (const json& bad : {json{{"lease_s", 0}}, json{{"lease_s", 15 * 60 + 1}}, json{{"lease_s", "60"}}}) {
    auto r = Berthd().Admin().Json(verb::post, base + "/takeover", bad);
    INFO(bad.dump());
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
  }
  for (const std::string query : {"?wait=change", "?wait=change&revision=x", "?wait=soon", "?wait=change&revision=1&timeout=2h"}) {
    auto r = Berthd().Admin().Json(verb::get, base + query, json::object());
    INFO(query);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
  }
  CHECK(Control(ws)["holder"] == "agent");

  // The workspace stops during a wait: the waiter hears of it then (same revision), not at its
  // timeout. A wait begun on the stopped workspace waits as asked (no loop of instant answers).
  uint64_t last = Control(ws)["revision"];
  auto stopping = std::async(std::launch::async, [&] {
    return Call(verb::get, fmt::format("{}?wait=change&revision={}&timeout=60s", base, last));
  });
  CHECK(stopping.wait_for(500ms) == std::future_status::timeout);
  Call(verb::post, "/v1/workspaces/" + ws + "/stop", json::object());
  REQUIRE(stopping.wait_for(20s) == std::future_status::ready);
  CHECK(stopping.get()["revision"] == last);
  Call(verb::post, "/v1/workspaces/" + ws + "/wait", json{{"state", "stopped"}, {"timeout_s", 60}});
  auto down = std::async(std::launch::async, [&] {
    return Call(verb::get, fmt::format("{}?wait=change&revision={}&timeout=3s", base, last));
  });
  CHECK(down.wait_for(1500ms) == std::future_status::timeout);
  REQUIRE(down.wait_for(10s) == std::future_status::ready);
  CHECK(down.get()["revision"] == last);
}

// --- the agent's eyes and hands --------------------------------------------------------------------

// A PNG's size, from its IHDR chunk.
std::pair<int, int> PngSize(const std::string& png) {
  REQUIRE(png.size() > 24);
  REQUIRE(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  auto be32 = [&](size_t at) {
    return (static_cast<uint8_t>(png[at]) << 24) | (static_cast<uint8_t>(png[at + 1]) << 16) |
           (static_cast<uint8_t>(png[at + 2]) << 8) | static_cast<uint8_t>(png[at + 3]);
  };
  return {be32(16), be32(20)};
}

TEST_CASE("desktop: a screenshot is QEMU's screen as a PNG of the size it states, scaled or as JPEG on "
          "request; a private takeover refuses it",
          "[desktop]") {
  std::string ws = Workspace("eyes", Qemu().socket());
  auto api = Berthd().Admin();
  auto shot = api.Request(verb::get, "/v1/workspaces/" + ws + "/desktop/screenshot");
  REQUIRE(shot);
  INFO(shot->body.substr(0, 300));
  REQUIRE(shot->status == 200);
  CHECK(shot->Header("Content-Type") == "image/png");
  int width = std::stoi(std::string(shot->Header("X-Screen-Width")));
  int height = std::stoi(std::string(shot->Header("X-Screen-Height")));
  CHECK(width >= 320);
  CHECK(height >= 200);
  CHECK(PngSize(shot->body) == std::pair{width, height});
  CHECK(shot->Header("X-Image-Width") == std::to_string(width));

  auto half = api.Request(verb::get, "/v1/workspaces/" + ws + "/desktop/screenshot?scale=0.5");
  REQUIRE(half);
  REQUIRE(half->status == 200);
  auto [hw, hh] = PngSize(half->body);
  CHECK(hw == static_cast<int>(std::lround(width * 0.5)));
  CHECK(hh == static_cast<int>(std::lround(height * 0.5)));
  CHECK(half->Header("X-Image-Width") == std::to_string(hw));
  CHECK(half->Header("X-Screen-Width") == std::to_string(width));

  auto jpeg = api.Request(verb::get, "/v1/workspaces/" + ws + "/desktop/screenshot?format=jpeg&quality=50");
  REQUIRE(jpeg);
  REQUIRE(jpeg->status == 200);
  CHECK(jpeg->Header("Content-Type") == "image/jpeg");
  CHECK(jpeg->body.substr(0, 3) == std::string("\xff\xd8\xff", 3));
  for (const char* bad : {"?scale=0", "?scale=2", "?scale=x", "?format=gif", "?quality=0"}) {
    auto r = api.Request(verb::get, "/v1/workspaces/" + ws + "/desktop/screenshot" + bad);
    REQUIRE(r);
    INFO(bad);
    CHECK(r->status == 400);
  }

  // A person's takeover leaves the agent its eyes, a private one does not.
  Call(verb::post, "/v1/workspaces/" + ws + "/desktop/control/takeover", json::object());
  auto watched = api.Request(verb::get, "/v1/workspaces/" + ws + "/desktop/screenshot");
  REQUIRE(watched);
  CHECK(watched->status == 200);
  Call(verb::post, "/v1/workspaces/" + ws + "/desktop/control/release", json::object());
  Call(verb::post, "/v1/workspaces/" + ws + "/desktop/control/takeover", json{{"private", true}});
  auto hidden = api.Request(verb::get, "/v1/workspaces/" + ws + "/desktop/screenshot");
  REQUIRE(hidden);
  CHECK(hidden->status == 423);
  CHECK(hidden->body.find("privately") != std::string::npos);
  Call(verb::post, "/v1/workspaces/" + ws + "/desktop/control/release", json::object());
  // A screen that is not there is a clear 503, not a hang.
  std::string blind = Workspace("blind", "/nonexistent/vnc.sock");
  auto none = api.Request(verb::get, "/v1/workspaces/" + blind + "/desktop/screenshot");
  REQUIRE(none);
  CHECK(none->status == 503);
}

TEST_CASE("desktop: the agent's actions reach the screen as RFB input byte for byte, all of it read by a server "
          "that drops what it has not read at a hang-up; a person's takeover refuses them with 423 and the server "
          "sees nothing",
          "[desktop]") {
  testing::RecordingRfbServer fake(/*drop_unread_at_hangup=*/true);
  std::string ws = Workspace("hands", fake.socket());
  auto api = Berthd().Admin();
  auto act = [&](const json& body) {
    auto r = api.Request(verb::post, "/v1/workspaces/" + ws + "/desktop/actions", body.dump(), "application/json");
    REQUIRE(r);
    return *r;
  };
  json batch = {{"actions",
                 {{{"type", "click"}, {"x", 3}, {"y", 4}},
                  {{"type", "type"}, {"text", "A!"}},
                  {{"type", "key"}, {"keys", "ctrl+c"}}}}};
  auto done = act(batch);
  INFO(done.body);
  REQUIRE(done.status == 200);
  auto answer = json::parse(done.body);
  CHECK(answer["done"] == 3);
  CHECK(answer["screen"] == json{{"width", 16}, {"height", 16}});  // the fake's ServerInit
  const uint32_t shift = 0xffe1, ctrl = 0xffe3;
  std::string want = kAgentEncodings + testing::PointerEvent(0, 3, 4) + testing::PointerEvent(1, 3, 4) +
                     testing::PointerEvent(0, 3, 4) +
                     testing::KeyEvent(true, shift) + testing::KeyEvent(true, 'A') + testing::KeyEvent(false, 'A') +
                     testing::KeyEvent(false, shift) + testing::KeyEvent(true, shift) + testing::KeyEvent(true, '!') +
                     testing::KeyEvent(false, '!') + testing::KeyEvent(false, shift) + testing::KeyEvent(true, ctrl) +
                     testing::KeyEvent(true, 'c') + testing::KeyEvent(false, 'c') + testing::KeyEvent(false, ctrl) +
                     kAgentSync;
  REQUIRE(fake.connections() == 1);
  REQUIRE(testing::WaitFor([&] { return fake.received(0).size() >= want.size(); }));
  CHECK(fake.received(0) == want);
  CHECK(fake.client_init(0) == 1);  // shared: the person's viewers stay

  // Off the screen: refused before anything is sent.
  auto off = act(json{{"type", "click"}, {"x", 16}, {"y", 0}});
  CHECK(off.status == 400);
  CHECK(off.body.find("off the 16x16 screen") != std::string::npos);

  // A person holds the desktop: 423 with who and since when, and nothing reaches the server.
  Call(verb::post, "/v1/workspaces/" + ws + "/desktop/control/takeover", json{{"reason", "login"}});
  size_t before = fake.connections();
  auto locked = act(json{{"type", "click"}, {"x", 1}, {"y", 1}});
  CHECK(locked.status == 423);
  auto error = json::parse(locked.body)["error"];
  CHECK(error["code"] == "locked");
  CHECK(error["details"]["holder"] == "human");
  CHECK(fake.connections() == before);
  Call(verb::post, "/v1/workspaces/" + ws + "/desktop/control/release", json{{"note", "logged in"}});
  auto again = act(json{{"type", "key"}, {"keys", "Return"}});
  CHECK(again.status == 200);
  // The agent's input is on the timeline like a person's, counted per burst.
  REQUIRE(testing::WaitFor(
      [&] {
        auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events?limit=1000");
        for (const auto& e : events["events"]) {
          if (e["type"] == "desktop_input" && e["data"]["actor"] == "agent") return true;
        }
        return false;
      },
      20s));
}

// --- the clipboard ---------------------------------------------------------------------------------

TEST_CASE("desktop: the agent puts any Unicode on the guest's clipboard and reads it back; the timeline says "
          "who and how much, never the text",
          "[desktop][clipboard]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("clip", fake.socket());
  std::string base = "/v1/workspaces/" + ws + "/desktop/clipboard";
  auto api = Berthd().Admin();
  const std::string text = "p\u00e4ssw\u00f6rd-free: \u4e16\u754c \u2713\n\ttabs and \"quotes\"";
  auto put = api.Request(verb::put, base, json{{"text", text}}.dump(), "application/json");
  REQUIRE(put);
  INFO(put->body);
  REQUIRE(put->status == 200);
  CHECK(json::parse(put->body)["bytes"] == text.size());
  // The tool got exactly the bytes (the agent's stdin), and reading gives them back.
  std::ifstream in(ClipboardDir() / "text", std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == text);
  CHECK(Call(verb::get, base)["text"] == text);
  auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events?type=desktop_clipboard_set");
  REQUIRE(events["events"].size() == 1);
  const auto& e = events["events"][0];
  CHECK(e["data"]["bytes"] == text.size());
  CHECK(e["data"]["holder"] == "agent");
  CHECK(e["actor"].get<std::string>().starts_with("key_"));
  CHECK(e.dump().find("\u4e16") == std::string::npos);
  CHECK(e.dump().find("rd-free") == std::string::npos);

  // Bad input is a clear 4xx and reaches no tool; the clipboard keeps its text.
  auto not_text = api.Request(verb::put, base, R"({"text": 5})", "application/json");
  REQUIRE(not_text);
  CHECK(not_text->status == 400);
  auto huge = api.Request(verb::put, base, json{{"text", std::string((1 << 20) + 1, 'x')}}.dump(), "application/json");
  REQUIRE(huge);
  CHECK(huge->status == 413);
  CHECK(Call(verb::get, base)["text"] == text);
  // The most there is, in the worst form for JSON (every byte escaped to six): through berthd and
  // the agent's exec both ways.
  const std::string most((1 << 20), '\x01');
  auto full = api.Request(verb::put, base, json{{"text", most}}.dump(), "application/json");
  REQUIRE(full);
  INFO(full->body.substr(0, 300));
  CHECK(full->status == 200);
  CHECK(Call(verb::get, base)["text"] == most);
  REQUIRE(api.Request(verb::put, base, json{{"text", text}}.dump(), "application/json")->status == 200);

  // No display yet: 503 with the reason, not an empty clipboard.
  std::ofstream(ClipboardDir() / "down") << "";
  auto down = api.Request(verb::get, base);
  std::filesystem::remove(ClipboardDir() / "down");
  REQUIRE(down);
  CHECK(down->status == 503);
  CHECK(down->body.find("not up yet") != std::string::npos);
}

TEST_CASE("desktop: during a takeover only the person holding control sets the clipboard (their control link "
          "pastes); the agent gets 423, and a private takeover hides the clipboard from it too",
          "[desktop][clipboard]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("clip-takeover", fake.socket());
  std::string base = "/v1/workspaces/" + ws + "/desktop/clipboard";
  auto agent = Berthd().Admin();
  // The person: a key of their own in the same tenant, and a control link made with it.
  auto made = agent.Json(verb::post, "/v1/keys", json{{"scope", "write"}, {"name", "person"}});
  REQUIRE(made);
  auto person = Berthd().WithKey((*made)["key"]);
  // A ticket names its page's viewer only while that viewer is open.
  auto open_link = [&](const std::string& mode, RfbViewer& v) {
    auto t = person.Json(verb::post, "/v1/workspaces/" + ws + "/desktop/tickets", json{{"mode", mode}});
    REQUIRE(t);
    REQUIRE(v.Open(Port(), VncTarget(ws, (*t)["ticket"]), Origin()));
    REQUIRE(v.Handshake(1) > 0);
    return (*t)["ticket"].get<std::string>();
  };
  RfbViewer control_viewer;
  std::string control_ticket = open_link("control", control_viewer);
  REQUIRE(agent.Request(verb::put, base, json{{"text", "before"}}.dump(), "application/json")->status == 200);

  auto taken = person.Json(verb::post, "/v1/workspaces/" + ws + "/desktop/control/takeover", json{{"reason", "paste"}});
  REQUIRE(taken);
  auto refused = agent.Request(verb::put, base, json{{"text", "agent"}}.dump(), "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 423);
  CHECK(json::parse(refused->body)["error"]["details"]["holder"] == "human");
  CHECK(Call(verb::get, base)["text"] == "before");  // reading stays allowed
  // The person's paste, through their control link's ticket (no key, as the desktop page sends it).
  auto keyless = client::ApiClient(Berthd().daemon().endpoint(), "");
  auto pasted = keyless.Request(verb::put, base, json{{"text", "from the person"}}.dump(), "application/json",
                                TicketHeader(control_ticket));
  REQUIRE(pasted);
  INFO(pasted->body);
  CHECK(pasted->status == 200);
  CHECK(Call(verb::get, base)["text"] == "from the person");
  auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events?type=desktop_clipboard_set");
  REQUIRE(events["events"].size() == 2);
  CHECK(events["events"][1]["data"]["holder"] == "human");
  CHECK(events["events"][1]["actor"] == (*made)["id"]);
  // A view link never writes it.
  RfbViewer view_viewer;
  std::string view_ticket = open_link("view", view_viewer);
  auto viewer = keyless.Request(verb::put, base, json{{"text", "viewer"}}.dump(), "application/json",
                                TicketHeader(view_ticket));
  REQUIRE(viewer);
  CHECK(viewer->status == 403);
  // The control link's page reads it too ("Copy from VM"); a view link's cannot.
  auto link_read = keyless.Request(verb::get, base, "", "", TicketHeader(control_ticket));
  REQUIRE(link_read);
  INFO(link_read->body);
  CHECK(link_read->status == 200);
  CHECK(json::parse(link_read->body)["text"] == "from the person");
  auto view_read = keyless.Request(verb::get, base, "", "", TicketHeader(view_ticket));
  REQUIRE(view_read);
  CHECK(view_read->status == 403);
  CHECK(view_read->body.find("\"text\"") == std::string::npos);
  REQUIRE(person.Json(verb::post, "/v1/workspaces/" + ws + "/desktop/control/release", json{{"note", "done"}}));

  // A private takeover: the person may have copied a password; the agent cannot read it, and
  // neither can a view link; the person holding it can, with their key or their control link.
  REQUIRE(person.Json(verb::post, "/v1/workspaces/" + ws + "/desktop/control/takeover", json{{"private", true}}));
  auto hidden = agent.Request(verb::get, base);
  REQUIRE(hidden);
  CHECK(hidden->status == 423);
  auto own = person.Request(verb::get, base);
  REQUIRE(own);
  CHECK(own->status == 200);
  auto own_link = keyless.Request(verb::get, base, "", "", TicketHeader(control_ticket));
  REQUIRE(own_link);
  CHECK(own_link->status == 200);
  REQUIRE(person.Json(verb::post, "/v1/workspaces/" + ws + "/desktop/control/release", json::object()));
  CHECK(Call(verb::get, base)["text"] == "from the person");
}

TEST_CASE("desktop: berthd's /mcp desktop tools see the screen as an image block, act, and say who holds it",
          "[desktop][mcp]") {
  testing::RecordingRfbServer fake(/*drop_unread_at_hangup=*/true);
  std::string hands = Workspace("mcp-hands", fake.socket());
  std::string eyes = Workspace("mcp-eyes", Qemu().socket());
  auto api = Berthd().Admin();
  std::string session = testing::McpSession(api);
  json shot = testing::McpToolCall(api, session, "desktop_screenshot", {{"workspace", eyes}, {"scale", 0.5}});
  INFO(shot.dump().substr(0, 400));
  REQUIRE_FALSE(shot.value("isError", false));
  REQUIRE(shot["content"].size() == 2);
  REQUIRE(shot["content"][1]["type"] == "image");
  auto png = protocol::Base64Decode(shot["content"][1]["data"].get<std::string>());
  REQUIRE(png);
  auto [w, h] = PngSize(*png);
  CHECK(shot["structuredContent"]["image"] == json{{"width", w}, {"height", h}});
  CHECK(w == static_cast<int>(std::lround(shot["structuredContent"]["screen"]["width"].get<int>() * 0.5)));

  json act = testing::McpToolCall(api, session, "desktop_act",
                                  {{"workspace", hands}, {"actions", {{{"type", "key"}, {"keys", "Return"}}}}});
  INFO(act.dump());
  REQUIRE_FALSE(act.value("isError", false));
  std::string want = kAgentEncodings + testing::KeyEvent(true, 0xff0d) + testing::KeyEvent(false, 0xff0d) + kAgentSync;
  REQUIRE(testing::WaitFor([&] { return fake.received(fake.connections() - 1).size() >= want.size(); }));
  CHECK(fake.received(fake.connections() - 1) == want);

  Call(verb::post, "/v1/workspaces/" + hands + "/desktop/control/takeover", json{{"reason", "captcha"}});
  json refused = testing::McpToolCall(api, session, "desktop_act",
                                      {{"workspace", hands}, {"actions", {{{"type", "key"}, {"keys", "a"}}}}});
  CHECK(refused.value("isError", false));
  json held = testing::McpToolCall(api, session, "desktop_control", {{"workspace", hands}});
  CHECK(held["content"][0]["text"].get<std::string>().find("captcha") != std::string::npos);
  auto waiter = std::async(std::launch::async, [&] {
    auto api2 = Berthd().Admin();
    std::string s2 = testing::McpSession(api2);
    return testing::McpToolCall(api2, s2, "desktop_control",
                                {{"workspace", hands}, {"wait_for_release", true}, {"timeout_s", 30}});
  });
  CHECK(waiter.wait_for(500ms) == std::future_status::timeout);
  Call(verb::post, "/v1/workspaces/" + hands + "/desktop/control/release", json{{"note", "done"}});
  REQUIRE(waiter.wait_for(20s) == std::future_status::ready);
  CHECK(waiter.get()["structuredContent"]["holder"] == "agent");
}

TEST_CASE("desktop: request_human shows the reason, waits for the person's takeover and hand-back, and "
          "returns their note; unanswered, it is withdrawn",
          "[desktop][mcp]") {
  testing::RecordingRfbServer fake;
  std::string ws = Workspace("mcp-human", fake.socket());
  auto waiter = std::async(std::launch::async, [&] {
    auto api = Berthd().Admin();
    std::string session = testing::McpSession(api);
    return testing::McpToolCall(api, session, "request_human",
                                {{"workspace", ws}, {"reason", "solve the captcha"}, {"timeout_s", 60}});
  });
  // The request is on the desktop's state (the page shows it) and on the timeline, with the link.
  REQUIRE(testing::WaitFor([&] { return Control(ws)["request"].is_object(); }));
  CHECK(Control(ws)["request"]["reason"] == "solve the captcha");
  CHECK(Control(ws)["request"]["taken"] == false);
  std::string page = fmt::format("{}/w/{}/desktop", Origin(), ws);
  auto events = Call(verb::get, "/v1/workspaces/" + ws + "/events?limit=1000");
  bool linked = false;
  for (const auto& e : events["events"]) {
    if (e["type"] == "desktop_help_requested") linked = e["data"]["url"] == page;
  }
  CHECK(linked);
  CHECK(waiter.wait_for(300ms) == std::future_status::timeout);
  Call(verb::post, "/v1/workspaces/" + ws + "/desktop/control/takeover", json::object());
  CHECK(Control(ws)["request"]["taken"] == true);
  CHECK(waiter.wait_for(300ms) == std::future_status::timeout);  // taken, not yet handed back
  Call(verb::post, "/v1/workspaces/" + ws + "/desktop/control/release", json{{"note", "solved, you are logged in"}});
  REQUIRE(waiter.wait_for(20s) == std::future_status::ready);
  json answered = waiter.get();
  INFO(answered.dump());
  REQUIRE_FALSE(answered.value("isError", false));
  CHECK(answered["structuredContent"]["answered"] == true);
  CHECK(answered["structuredContent"]["handback"]["note"] == "solved, you are logged in");
  CHECK(answered["structuredContent"]["request"].is_null());
  std::string text = answered["content"][0]["text"];
  CHECK(text.find(page) != std::string::npos);
  CHECK(text.find("solved, you are logged in") != std::string::npos);

  // Nobody comes: the request goes away by itself when the wait ends.
  auto api = Berthd().Admin();
  std::string session = testing::McpSession(api);
  json alone = testing::McpToolCall(api, session, "request_human", {{"workspace", ws}, {"reason", "pay"}, {"timeout_s", 1}});
  INFO(alone.dump());
  CHECK(alone["structuredContent"]["answered"] == false);
  CHECK(Control(ws)["request"].is_null());
  CHECK(testing::WaitFor([&] { return HasEvent(ws, "desktop_help_withdrawn"); }));
  // Over HTTP, a reason is required and bounded.
  auto bad = Berthd().Admin().Json(verb::post, "/v1/workspaces/" + ws + "/desktop/control/request", json{{"reason", ""}});
  CHECK_FALSE(bad.has_value());
}

}  // namespace berth
