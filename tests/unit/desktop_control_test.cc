// Desktop tickets and control leases on a fake clock (controller/desktop/tickets.h, control.h).
#include <algorithm>

#include <catch2/catch.hpp>

#include "common/json.h"
#include "controller/desktop/control.h"
#include "controller/desktop/tickets.h"

namespace berth::desktop {
namespace {

struct FakeClock {
  int64_t now = 1'800'000'000;
  std::function<int64_t()> Fn() {
    return [this] { return now; };
  }
};

// --- tickets ---------------------------------------------------------------------------------

TEST_CASE("a ticket opens one viewer once") {
  FakeClock clock;
  DesktopTickets tickets(clock.Fn());
  auto issued = tickets.Issue("t1", "ws_a", "key_1", ViewerMode::kControl);
  REQUIRE(issued);
  CHECK(issued->secret.starts_with("dt_"));
  CHECK(issued->secret.size() == 3 + 64);
  CHECK(issued->expires_at == clock.now + 60);
  auto peek = tickets.Peek(issued->secret);
  REQUIRE(peek);
  CHECK(peek->tenant_id == "t1");
  auto first = tickets.Redeem(issued->secret, "ws_a");
  REQUIRE(first);
  CHECK(first->mode == ViewerMode::kControl);
  CHECK(first->key_id == "key_1");
  auto second = tickets.Redeem(issued->secret, "ws_a");
  REQUIRE_FALSE(second);
  CHECK(second.error().code == ErrorCode::kUnauthenticated);
  // While its viewer is open, its page may show it again (takeover, release); not after.
  CHECK(tickets.OpenViewer(issued->secret));
  tickets.ViewerClosed(first->hash);
  CHECK_FALSE(tickets.OpenViewer(issued->secret));
  CHECK_FALSE(tickets.Redeem(issued->secret, "ws_a"));
}

TEST_CASE("a ticket expires after 60 seconds, redeemed or not") {
  FakeClock clock;
  DesktopTickets tickets(clock.Fn());
  auto issued = tickets.Issue("t1", "ws_a", "key_1", ViewerMode::kView);
  REQUIRE(issued);
  clock.now += 59;
  CHECK(tickets.Peek(issued->secret));
  clock.now += 1;
  CHECK_FALSE(tickets.Peek(issued->secret));
  CHECK_FALSE(tickets.Redeem(issued->secret, "ws_a"));
}

TEST_CASE("a ticket is for its workspace only, and another workspace does not use it up") {
  FakeClock clock;
  DesktopTickets tickets(clock.Fn());
  auto issued = tickets.Issue("t1", "ws_a", "key_1", ViewerMode::kView);
  REQUIRE(issued);
  CHECK_FALSE(tickets.Redeem(issued->secret, "ws_b"));
  CHECK(tickets.Redeem(issued->secret, "ws_a"));
  CHECK_FALSE(tickets.Redeem("dt_" + std::string(64, '0'), "ws_a"));
  CHECK_FALSE(tickets.Redeem("bk_not_a_ticket", "ws_a"));
}

TEST_CASE("one tenant cannot take every ticket: a cap per tenant, lifted as tickets expire") {
  FakeClock clock;
  DesktopTickets tickets(clock.Fn());
  for (size_t i = 0; i < kMaxTicketsPerTenant; ++i) {
    REQUIRE(tickets.Issue("greedy", "ws_a", "key_1", ViewerMode::kView));
  }
  auto refused = tickets.Issue("greedy", "ws_a", "key_1", ViewerMode::kView);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kResourceExhausted);
  CHECK(tickets.Issue("other", "ws_b", "key_2", ViewerMode::kView));
  clock.now += 60;
  CHECK(tickets.Issue("greedy", "ws_a", "key_1", ViewerMode::kView));
  CHECK(tickets.size() == 1);  // the expired ones were dropped, the other tenant's too
}

TEST_CASE("viewer modes parse strictly") {
  CHECK(ParseViewerMode("view").value() == ViewerMode::kView);
  CHECK(ParseViewerMode("control").value() == ViewerMode::kControl);
  CHECK_FALSE(ParseViewerMode("Control"));
  CHECK_FALSE(ParseViewerMode(""));
}

// --- control ---------------------------------------------------------------------------------

ControlOptions Options() {
  ControlOptions o;
  o.lease = std::chrono::seconds(900);
  o.viewer_grace = std::chrono::seconds(30);
  o.burst_gap = std::chrono::seconds(5);
  return o;
}

std::vector<std::string> Types(const std::vector<ControlEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.type);
  return out;
}

TEST_CASE("the agent holds control until a person takes over, and its input is locked out then") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  CHECK(control.Get("ws").holder == Holder::kAgent);
  CHECK(control.CheckAgentInput("ws"));
  CHECK_FALSE(control.InputAllowed("ws", ViewerMode::kControl));
  control.ViewerOpened("ws", ViewerMode::kControl);
  auto taken = control.Takeover("ws", "key_h", "log in", false);
  REQUIRE(taken);
  CHECK(Types(taken->events) == std::vector<std::string>{"desktop_control_taken"});
  CHECK(taken->state.holder == Holder::kHuman);
  CHECK(taken->state.lease_expires == clock.now + 900);
  CHECK(control.InputAllowed("ws", ViewerMode::kControl));
  CHECK_FALSE(control.InputAllowed("ws", ViewerMode::kView));
  auto locked = control.CheckAgentInput("ws");
  REQUIRE_FALSE(locked);
  CHECK(locked.error().code == ErrorCode::kLocked);
  CHECK(HttpStatus(locked.error().code) == 423);
  auto details = ParseJson(locked.error().details).value();
  CHECK(details["holder"] == "human");
  CHECK(details["by"] == "key_h");
  CHECK(details["since"].is_string());
  // Someone else cannot take it from them; the same person renews.
  auto other = control.Takeover("ws", "key_x", "", false);
  REQUIRE_FALSE(other);
  CHECK(other.error().code == ErrorCode::kFailedPrecondition);
  clock.now += 10;
  auto again = control.Takeover("ws", "key_h", "", false);
  REQUIRE(again);
  CHECK(again->events.empty());
  CHECK(again->state.lease_expires == clock.now + 900);
  auto released = control.Release("ws", "key_h", "logged in");
  CHECK(Types(released.events) == std::vector<std::string>{"desktop_control_released"});
  CHECK(released.events[0].data["note"] == "logged in");
  CHECK(released.events[0].data["cause"] == "released");
  CHECK(control.CheckAgentInput("ws"));
  // Releasing what the agent holds changes nothing.
  CHECK(control.Release("ws", "key_h", "").events.empty());
}

TEST_CASE("a help request stays open until a person takes over and hands back, and the hand-back answers it") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  auto asked = control.RequestHelp("ws", "key_a", "solve the captcha");
  CHECK(Types(asked.events) == std::vector<std::string>{"desktop_help_requested"});
  REQUIRE(asked.state.request);
  CHECK_FALSE(asked.state.request->taken);
  CHECK(asked.state.ToJson()["request"]["reason"] == "solve the captcha");
  // A release while the agent holds control is no answer; a takeover marks it taken.
  CHECK(control.Release("ws", "key_h", "").events.empty());
  clock.now += 5;
  REQUIRE(control.Takeover("ws", "key_h", "", false));
  CHECK(control.Get("ws").request->taken);
  // Taken: the agent's withdrawal no longer removes it (the person is at it).
  CHECK(control.WithdrawHelp("ws", "key_a").events.empty());
  clock.now += 5;
  auto back = control.Release("ws", "key_h", "solved it");
  CHECK_FALSE(back.state.request);
  REQUIRE(back.state.handback);
  CHECK(back.state.handback->note == "solved it");
  CHECK(back.state.handback->request == "solve the captcha");
  CHECK(back.state.handback->request_id == asked.state.request->id);
  CHECK(back.state.handback->at == clock.now);
  auto j = back.state.ToJson();
  CHECK(j["request"].is_null());
  CHECK(j["handback"]["note"] == "solved it");
  CHECK(j["handback"]["cause"] == "released");
}

TEST_CASE("an open help request and a recent hand-back outlive the ticks that forget idle workspaces") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  control.RequestHelp("ws", "key_a", "log in");
  clock.now += 120;
  control.Tick();
  REQUIRE(control.Get("ws").request);
  REQUIRE(control.Takeover("ws", "key_h", "", false));
  control.Release("ws", "key_h", "done");
  clock.now += 60;
  control.Tick();
  REQUIRE(control.Get("ws").handback);
  CHECK(control.Get("ws").handback->note == "done");
  clock.now += DesktopControl::kHandbackKept.count();
  control.Tick();
  CHECK_FALSE(control.Get("ws").handback);
}

TEST_CASE("a help request nobody took is withdrawn, and a takeover without one answers none") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  control.RequestHelp("ws", "key_a", "log in");
  auto withdrawn = control.WithdrawHelp("ws", "key_a");
  CHECK(Types(withdrawn.events) == std::vector<std::string>{"desktop_help_withdrawn"});
  CHECK_FALSE(withdrawn.state.request);
  REQUIRE(control.Takeover("ws", "key_h", "", false));
  auto back = control.Release("ws", "key_h", "just looking");
  REQUIRE(back.state.handback);
  CHECK(back.state.handback->request.empty());
  CHECK(back.state.ToJson()["handback"]["request"].is_null());
  // A lease that runs out answers a taken request too, with its cause.
  control.RequestHelp("ws", "key_a", "pay");
  control.ViewerOpened("ws", ViewerMode::kControl);
  REQUIRE(control.Takeover("ws", "key_h", "", false));
  clock.now += 901;
  control.Tick();
  auto state = control.Get("ws");
  CHECK(state.holder == Holder::kAgent);
  CHECK_FALSE(state.request);
  REQUIRE(state.handback);
  CHECK(state.handback->request == "pay");
  CHECK(state.handback->cause != "released");
}

TEST_CASE("a lease expires by itself and is renewed by the person's input") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  control.ViewerOpened("ws", ViewerMode::kControl);
  REQUIRE(control.Takeover("ws", "key_h", "", false));
  clock.now += 800;
  (void)control.NoteInput("ws", true, "key_h", 1, 0);  // renews to now + 900
  clock.now += 800;
  CHECK(Types(control.Tick()) == std::vector<std::string>{"desktop_input"});  // the burst went quiet
  CHECK(control.Get("ws").holder == Holder::kHuman);
  clock.now += 100;
  auto events = control.Tick();
  REQUIRE(Types(events) == std::vector<std::string>{"desktop_control_released"});
  CHECK(events[0].data["cause"] == "lease_expired");
  CHECK(control.Get("ws").holder == Holder::kAgent);
}

TEST_CASE("a person's own shorter lease is kept through renewals, ends by itself, and is capped at the operator's") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  control.ViewerOpened("ws", ViewerMode::kControl);
  auto taken = control.Takeover("ws", "key_h", "captcha", false, nullptr, std::chrono::seconds(60));
  REQUIRE(taken);
  CHECK(taken->state.lease_expires == clock.now + 60);
  clock.now += 50;
  (void)control.NoteInput("ws", true, "key_h", 1, 0);  // renews by their 60, not the operator's 900
  CHECK(control.Get("ws").lease_expires == clock.now + 60);
  clock.now += 10;
  REQUIRE(control.Takeover("ws", "key_h", "", false));  // a renewal without a lease keeps theirs
  CHECK(control.Get("ws").lease_expires == clock.now + 60);
  clock.now += 60;
  auto events = control.Tick();
  auto released = std::find_if(events.begin(), events.end(),
                               [](const ControlEvent& e) { return e.type == "desktop_control_released"; });
  REQUIRE(released != events.end());
  CHECK(released->data["cause"] == "lease_expired");
  CHECK(control.Get("ws").holder == Holder::kAgent);
  // More than the operator allows is cut to the operator's lease.
  auto longer = control.Takeover("ws", "key_h", "", false, nullptr, std::chrono::seconds(100000));
  REQUIRE(longer);
  CHECK(longer->state.lease_expires == clock.now + 900);
  CHECK(control.max_lease() == std::chrono::seconds(900));
}

TEST_CASE("the revision changes with each takeover, hand-back and help request, never with a lease's renewal, "
          "and never goes back") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  std::vector<uint64_t> seen = {control.Get("ws").revision};
  auto changed = [&] {
    uint64_t now = control.Get("ws").revision;
    bool fresh = std::find(seen.begin(), seen.end(), now) == seen.end();
    seen.push_back(now);
    return fresh;
  };
  control.ViewerOpened("ws", ViewerMode::kControl);
  CHECK_FALSE(changed());  // a viewer is no change of control
  control.RequestHelp("ws", "key_a", "captcha");
  CHECK(changed());
  REQUIRE(control.Takeover("ws", "key_h", "", false));
  CHECK(changed());
  clock.now += 5;
  (void)control.NoteInput("ws", true, "key_h", 1, 0);
  REQUIRE(control.Takeover("ws", "key_h", "", false));  // a renewal
  CHECK_FALSE(changed());
  control.Release("ws", "key_h", "done");
  CHECK(changed());
  control.RequestHelp("ws", "key_a", "again");
  CHECK(changed());
  control.WithdrawHelp("ws", "key_a");
  CHECK(changed());
  control.WithdrawHelp("ws", "key_a");  // nothing open: nothing changes
  CHECK_FALSE(changed());
  REQUIRE(control.Takeover("ws", "key_h", "", false, nullptr, std::chrono::seconds(10)));
  CHECK(changed());
  clock.now += 11;
  control.Tick();  // the lease ran out
  CHECK(control.Get("ws").holder == Holder::kAgent);
  CHECK(changed());
  CHECK(control.Get("ws").ToJson()["revision"] == control.Get("ws").revision);
}

TEST_CASE("a takeover ends after the grace period once its control viewers are gone") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  control.ViewerOpened("ws", ViewerMode::kControl);
  control.ViewerOpened("ws", ViewerMode::kView);
  REQUIRE(control.Takeover("ws", "key_h", "", false));
  control.ViewerClosed("ws", ViewerMode::kControl);  // a view viewer does not keep it
  clock.now += 29;
  CHECK(control.Tick().empty());
  // A reload within the grace keeps it.
  control.ViewerOpened("ws", ViewerMode::kControl);
  clock.now += 60;
  CHECK(control.Tick().empty());
  control.ViewerClosed("ws", ViewerMode::kControl);
  clock.now += 30;
  auto events = control.Tick();
  REQUIRE(Types(events) == std::vector<std::string>{"desktop_control_released"});
  CHECK(events[0].data["cause"] == "viewer_gone");
}

TEST_CASE("a takeover with no control viewer open must get one within the grace") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  REQUIRE(control.Takeover("ws", "key_h", "", true));
  CHECK(control.Get("ws").is_private);
  clock.now += 30;
  CHECK(Types(control.Tick()) == std::vector<std::string>{"desktop_control_released"});
}

TEST_CASE("input is counted per burst and per actor") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  CHECK(control.NoteInput("ws", false, "agent", 1, 0).empty());
  clock.now += 1;
  CHECK(control.NoteInput("ws", false, "agent", 0, 3).empty());
  clock.now += 5;  // a gap: the agent's first burst ends when the next input comes
  auto ended = control.NoteInput("ws", false, "agent", 2, 0);
  REQUIRE(ended.size() == 1);
  CHECK(ended[0].data["actor"] == "agent");
  CHECK(ended[0].data["clicks"] == 1);
  CHECK(ended[0].data["keys"] == 3);
  CHECK(ended[0].data["messages"] == 2);
  // A takeover closes the agent's burst first, so the timeline reads in order.
  control.ViewerOpened("ws", ViewerMode::kControl);
  auto taken = control.Takeover("ws", "key_h", "", false);
  REQUIRE(taken);
  CHECK(Types(taken->events) == std::vector<std::string>{"desktop_input", "desktop_control_taken"});
  (void)control.NoteInput("ws", true, "key_h", 0, 4);
  auto released = control.Release("ws", "key_h", "");
  REQUIRE(Types(released.events) == std::vector<std::string>{"desktop_input", "desktop_control_released"});
  CHECK(released.events[0].data["actor"] == "human");
  CHECK(released.events[0].data["keys"] == 4);
}

TEST_CASE("shutdown hands every person's control back") {
  FakeClock clock;
  DesktopControl control(Options(), clock.Fn());
  control.ViewerOpened("a", ViewerMode::kControl);
  REQUIRE(control.Takeover("a", "key_h", "", false));
  auto events = control.ReleaseAll("berthd_shutdown");
  REQUIRE(Types(events) == std::vector<std::string>{"desktop_control_released"});
  CHECK(events[0].data["cause"] == "berthd_shutdown");
  CHECK(control.Get("a").holder == Holder::kAgent);
}

}  // namespace
}  // namespace berth::desktop
