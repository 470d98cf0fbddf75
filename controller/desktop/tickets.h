// Desktop tickets: how a browser gets onto a workspace's desktop without an API key in a URL.
// `POST /v1/workspaces/{ws}/desktop/tickets {mode}` (a write key) issues one; the viewer's
// WebSocket presents it as `?ticket=`. A ticket:
//  - is 256 random bits ("dt_" + 64 hex), shown once, kept only as its SHA-256 and in memory
//    (a berthd restart forgets every ticket: they live a minute anyway);
//  - opens one workspace, in one mode: `view` (input always dropped, whatever the viewer
//    sends, and never a takeover) or `control` (input passes while a person holds control);
//  - is single use: redeeming it opens one viewer; a second redemption is refused;
//  - expires kTicketTtl after it was issued, redeemed or not;
//  - once redeemed, stands for its viewer while that viewer is open: a `control` viewer's page
//    takes over and hands back with it (AuthorizeViewer), and nothing else.
// Every refusal says the same ("no such ticket"), so a caller learns nothing about tickets it
// does not hold. Thread-safe (one mutex, a leaf); never blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/error.h"

namespace berth::desktop {

// Long enough to open a page after asking for it; short enough that a leaked link is stale.
inline constexpr std::chrono::seconds kTicketTtl{60};
// Outstanding tickets at most (expired ones are dropped first): bounds what berthd holds.
inline constexpr size_t kMaxTickets = 10000;
// Per tenant: one tenant's keys cannot take every other tenant's tickets away.
inline constexpr size_t kMaxTicketsPerTenant = 1000;

enum class ViewerMode { kView, kControl };
std::string_view ViewerModeName(ViewerMode mode);
Result<ViewerMode> ParseViewerMode(std::string_view name);

struct Ticket {
  std::string hash;  // SHA-256 of the secret: the ticket's identity here
  std::string tenant_id;
  std::string workspace_id;
  std::string key_id;  // the key that issued it (who the viewer acts for)
  ViewerMode mode = ViewerMode::kView;
  int64_t expires_at = 0;  // unix seconds
};

struct IssuedTicket {
  std::string secret;  // "dt_…", returned once
  int64_t expires_at = 0;
};

class DesktopTickets {
 public:
  // `clock`: unix seconds (a fake one in unit tests).
  explicit DesktopTickets(std::function<int64_t()> clock) : clock_(std::move(clock)) {}

  // A new ticket for `workspace_id`. resource_exhausted at kMaxTickets live ones, or at
  // kMaxTicketsPerTenant of `tenant_id`'s.
  Result<IssuedTicket> Issue(const std::string& tenant_id, const std::string& workspace_id,
                             const std::string& key_id, ViewerMode mode);
  // The ticket `secret` names while it can still be redeemed (to learn its tenant before the
  // workspace is looked up); unauthenticated otherwise. Uses nothing up.
  Result<Ticket> Peek(std::string_view secret) const;
  // Redeems `secret` for a viewer of `workspace_id` (single use). unauthenticated for an
  // unknown, used or expired ticket, or one of another workspace (a wrong workspace does not
  // use it up).
  Result<Ticket> Redeem(std::string_view secret, const std::string& workspace_id);
  // A redeemed ticket whose viewer is still open, presented again by its page (to read the
  // control state, to take over or hand back: the caller checks the mode); unauthenticated
  // otherwise.
  Result<Ticket> OpenViewer(std::string_view secret) const;
  // The viewer of a redeemed ticket has closed: the ticket is gone for good.
  void ViewerClosed(const std::string& hash);
  size_t size() const;

 private:
  struct Entry {
    Ticket ticket;
    bool redeemed = false;
  };
  void DropExpiredLocked(int64_t now);

  std::function<int64_t()> clock_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry, std::less<>> by_hash_;
};

}  // namespace berth::desktop
