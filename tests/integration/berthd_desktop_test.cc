// berthd's desktop bridge end to end without a VM: berthd in-process (unix transport, libvirt's
// test driver), its VNC sockets pointed (DesktopConfig::vnc_socket_for_test) at a real QEMU
// (no guest: the handshake and real framebuffer updates) or at a recording fake RFB server
// (what reaches the server, byte for byte). Viewers are raw RFB over berthd's WebSocket, as a
// forged viewer would speak it.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/unix_time.h"
#include "tests/integration/desktop_support.h"
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

testing::TestBerthd& Berthd() {
  static testing::TestBerthd berthd([](Config& c) {
    c.desktop.vnc_socket_for_test = [](const std::string& id) {
      std::lock_guard lock(sockets_mutex);
      auto it = sockets.find(id);
      return it == sockets.end() ? std::filesystem::path("/nonexistent/vnc.sock") : it->second;
    };
    c.desktop.clock_for_test = [] { return UnixNow() + clock_offset.load(); };
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

}  // namespace berth
