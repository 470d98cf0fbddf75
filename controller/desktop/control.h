// Who controls a workspace's desktop: the agent (the default, and after every berthd restart)
// or a person, for a lease (DESIGN.md, "Desktop": one party controls input at a time, enforced
// by berthd). Pure rules over a clock, in memory:
//  - a takeover by a person (a write key acting for them, or a control viewer's ticket) gives
//    them control for `lease`, renewed by each input of theirs that reaches the guest;
//  - it ends on release, when the lease runs out, or when no control viewer has been open for
//    `viewer_grace` (counted from the takeover when none is open then: the person is expected
//    to open one);
//  - input is counted per burst (a run of input with gaps under `burst_gap`) by actor: clicks
//    (buttons pressed) and keys (keys pressed);
//  - while a person holds control, CheckAgentInput is the 423 `locked` error the agent's input
//    paths answer (who holds it, since when, until when).
// Every change comes back as ControlEvents for the caller to put on the workspace's timeline
// (`desktop_control_taken`, `desktop_control_released`, `desktop_input`); nothing here does I/O.
// Expiry happens in Tick, which the owner calls every second or so (DesktopService).
// Thread-safe (one mutex, a leaf); never blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/desktop/tickets.h"
#include "controller/store/event_filter.h"

namespace berth::desktop {

struct ControlOptions {
  // A takeover lasts this long after the person's last input (the default).
  std::chrono::seconds lease{15 * 60};
  // A person whose control viewers are all gone this long hands back (a closed tab, a laptop
  // lid): long enough for a page reload or a network blip.
  std::chrono::seconds viewer_grace{30};
  // Input with gaps shorter than this is one burst, one timeline event.
  std::chrono::seconds burst_gap{5};
};

enum class Holder { kAgent, kHuman };
std::string_view HolderName(Holder holder);

// The agent asking a person to take over (MCP's request_human): shown on the desktop page until
// the person who took over after it hands back, or the agent withdraws it.
struct HelpRequest {
  uint64_t id = 0;  // unique in this berthd: which request a hand-back answered
  std::string reason;
  int64_t since = 0;
  std::string by;      // the key the agent acts as
  bool taken = false;  // a person has taken over since it was made
};

// The last hand-back: what the person left for the agent.
struct Handback {
  std::string note;
  std::string by;
  std::string cause;  // released, lease expired, viewer gone, shutdown
  int64_t at = 0;
  std::string request;  // the reason of the help request it answered, if any
  uint64_t request_id = 0;
  // Chrome's tabs ([{url, title}], the guest's words) when the person took over and when they
  // handed back; null when they could not be read (no Chrome, a lease that ran out).
  nlohmann::json tabs_before;
  nlohmann::json tabs_after;
};

struct ControlState {
  Holder holder = Holder::kAgent;
  int64_t since = 0;  // unix seconds; 0: the agent has held it since berthd started
  std::string by;     // who took over (a key id), or who handed back
  std::optional<int64_t> lease_expires;
  std::string reason;
  bool is_private = false;  // a private takeover: screenshots and page reads are refused too
  std::optional<HelpRequest> request;
  std::optional<Handback> handback;
  // Changes with each takeover, hand-back and help request or withdrawal (not with a lease's
  // renewal), never to a value it had before in this berthd: GET …/desktop/control?wait=change
  // &revision=N answers once it is not N. 0: nothing has happened since berthd started.
  uint64_t revision = 0;
  nlohmann::json ToJson() const;
};

// The `by` of what berthd itself does (a lease that ran out, a viewer gone).
inline constexpr std::string_view kBerthdActor = "berthd";

struct ControlEvent {
  std::string workspace_id;
  std::string type;
  std::string message;
  nlohmann::json data = nlohmann::json::object();
  // Who caused it, for the timeline: the key in data.by, or berthd itself (a lease that ran
  // out, a viewer gone).
  std::string Actor() const;
};

struct ControlChange {
  ControlState state;
  std::vector<ControlEvent> events;
};

class DesktopControl {
 public:
  // How long a workspace's last hand-back is kept once nothing else is (its state is memory).
  static constexpr std::chrono::seconds kHandbackKept{3600};

  DesktopControl(ControlOptions options, std::function<int64_t()> clock)
      : options_(options), clock_(std::move(clock)) {}

  ControlState Get(const std::string& workspace_id) const;
  // A person takes over as `by`. Taking over again as the same `by` renews the lease;
  // failed_precondition while someone else holds it.
  // `tabs`: Chrome's tabs as the person found them (null: unknown), for the hand-back's summary.
  // `lease`: the person's own, shorter lease (a quick captcha), at most the operator's
  // (options.lease, also the default); it applies to each renewal until the hand-back.
  Result<ControlChange> Takeover(const std::string& workspace_id, const std::string& by,
                                 const std::string& reason, bool is_private, nlohmann::json tabs = nullptr,
                                 std::optional<std::chrono::seconds> lease = std::nullopt);
  // The longest lease a takeover may ask for (the operator's desktop.lease_s).
  std::chrono::seconds max_lease() const { return options_.lease; }
  // Hands control back to the agent; nothing changes (no event) when the agent holds it.
  // `tabs`: Chrome's tabs as the person leaves them (null: unknown).
  ControlChange Release(const std::string& workspace_id, const std::string& by, const std::string& note,
                        nlohmann::json tabs = nullptr);
  // The agent asks a person to take over, for `reason`; replaces an open request of its own.
  // A person already holding control counts as having taken it.
  ControlChange RequestHelp(const std::string& workspace_id, const std::string& by, const std::string& reason);
  // The agent withdraws its request (it timed out waiting); nothing changes when none is open
  // or a person has already taken over for it (their hand-back answers it).
  ControlChange WithdrawHelp(const std::string& workspace_id, const std::string& by);
  // Whether input from a viewer in `mode` reaches the guest now: a control viewer's while a
  // person holds control, a view viewer's never.
  bool InputAllowed(const std::string& workspace_id, ViewerMode mode) const;
  // Input that reached the guest, from `human` (a viewer) or the agent: counted in the
  // current burst; a person's renews their lease. Returns the burst that ended, if any.
  std::vector<ControlEvent> NoteInput(const std::string& workspace_id, bool human, const std::string& by,
                                      int clicks, int keys);
  // A viewer opened or closed (control viewers keep a person's takeover alive).
  void ViewerOpened(const std::string& workspace_id, ViewerMode mode);
  void ViewerClosed(const std::string& workspace_id, ViewerMode mode);
  // Ends leases that ran out, takeovers whose viewers are gone, and bursts that went quiet.
  std::vector<ControlEvent> Tick();
  // At shutdown: every person's control back to the agent (a restarted berthd starts with the
  // agent in control), and the bursts in progress.
  std::vector<ControlEvent> ReleaseAll(const std::string& cause);
  // ok while the agent holds control; `locked` (423) with who holds it otherwise.
  Status CheckAgentInput(const std::string& workspace_id) const;
  // Whether the agent may read the screen (screenshots): locked only during a private
  // takeover (a person typing a password), with the same details.
  Status CheckAgentScreen(const std::string& workspace_id) const;

 private:
  struct Burst {
    std::string by;
    int64_t from = 0;
    int64_t last = 0;
    int64_t clicks = 0;
    int64_t keys = 0;
    int64_t messages = 0;
  };
  struct Entry {
    ControlState state;
    int control_viewers = 0;
    int viewers = 0;
    std::optional<int64_t> grace_until;  // set while a person holds control with no viewer
    std::chrono::seconds lease{0};       // the holder's lease, renewed by their input
    nlohmann::json tabs_before;          // Chrome's tabs at the takeover
    std::optional<Burst> human;
    std::optional<Burst> agent;
  };
  void ReleaseLocked(const std::string& id, Entry& e, const std::string& by, const std::string& note,
                     const std::string& cause, int64_t now, std::vector<ControlEvent>& out,
                     nlohmann::json tabs_after = nullptr);
  static void FlushBurst(const std::string& id, std::optional<Burst>& burst, bool human,
                         std::vector<ControlEvent>& out);

  ControlOptions options_;
  std::function<int64_t()> clock_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;  // by workspace id; absent: the agent, no viewers
  uint64_t next_request_ = 1;
  uint64_t last_revision_ = 0;  // the last ControlState::revision given
};

}  // namespace berth::desktop
