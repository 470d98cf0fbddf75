#include "controller/desktop/tickets.h"

#include <fmt/format.h>

#include "common/random.h"

namespace berth::desktop {
namespace {

constexpr std::string_view kPrefix = "dt_";

Error NoSuchTicket() {
  return Error(ErrorCode::kUnauthenticated, "no such ticket (tickets are single use and expire after 60 s)");
}

}  // namespace

std::string_view ViewerModeName(ViewerMode mode) {
  return mode == ViewerMode::kControl ? "control" : "view";
}

Result<ViewerMode> ParseViewerMode(std::string_view name) {
  if (name == "view") return ViewerMode::kView;
  if (name == "control") return ViewerMode::kControl;
  return Fail(ErrorCode::kInvalidArgument, fmt::format("mode must be \"view\" or \"control\", not \"{}\"", name));
}

void DesktopTickets::DropExpiredLocked(int64_t now) {
  for (auto it = by_hash_.begin(); it != by_hash_.end();) {
    // A redeemed ticket stays while its viewer is open (ViewerClosed removes it).
    if (!it->second.redeemed && it->second.ticket.expires_at <= now) {
      it = by_hash_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<IssuedTicket> DesktopTickets::Issue(const std::string& tenant_id, const std::string& workspace_id,
                                           const std::string& key_id, ViewerMode mode) {
  IssuedTicket out;
  out.secret = std::string(kPrefix) + RandomHex(32);
  int64_t now = clock_();
  out.expires_at = now + kTicketTtl.count();
  Ticket t;
  t.hash = Sha256Hex(out.secret);
  t.tenant_id = tenant_id;
  t.workspace_id = workspace_id;
  t.key_id = key_id;
  t.mode = mode;
  t.expires_at = out.expires_at;
  std::lock_guard lock(mutex_);
  auto tenant_count = [&] {
    size_t n = 0;
    for (const auto& [hash, e] : by_hash_) n += e.ticket.tenant_id == tenant_id ? 1 : 0;
    return n;
  };
  if (by_hash_.size() >= kMaxTickets || tenant_count() >= kMaxTicketsPerTenant) DropExpiredLocked(now);
  if (by_hash_.size() >= kMaxTickets || tenant_count() >= kMaxTicketsPerTenant) {
    return Fail(ErrorCode::kResourceExhausted, "too many desktop tickets outstanding; try again in a minute");
  }
  std::string hash = t.hash;
  by_hash_.emplace(std::move(hash), Entry{std::move(t), false});
  return out;
}

Result<Ticket> DesktopTickets::Redeem(std::string_view secret, const std::string& workspace_id) {
  if (!secret.starts_with(kPrefix)) return Fail(NoSuchTicket());
  std::string hash = Sha256Hex(secret);
  int64_t now = clock_();
  std::lock_guard lock(mutex_);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || it->second.redeemed) return Fail(NoSuchTicket());
  if (it->second.ticket.expires_at <= now) {
    by_hash_.erase(it);
    return Fail(NoSuchTicket());
  }
  if (it->second.ticket.workspace_id != workspace_id) return Fail(NoSuchTicket());
  it->second.redeemed = true;
  return it->second.ticket;
}

Result<Ticket> DesktopTickets::Peek(std::string_view secret) const {
  if (!secret.starts_with(kPrefix)) return Fail(NoSuchTicket());
  std::string hash = Sha256Hex(secret);
  int64_t now = clock_();
  std::lock_guard lock(mutex_);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || it->second.redeemed || it->second.ticket.expires_at <= now) {
    return Fail(NoSuchTicket());
  }
  return it->second.ticket;
}

Result<Ticket> DesktopTickets::OpenViewer(std::string_view secret) const {
  if (!secret.starts_with(kPrefix)) return Fail(NoSuchTicket());
  std::string hash = Sha256Hex(secret);
  std::lock_guard lock(mutex_);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || !it->second.redeemed) return Fail(NoSuchTicket());
  return it->second.ticket;
}

void DesktopTickets::ViewerClosed(const std::string& hash) {
  std::lock_guard lock(mutex_);
  by_hash_.erase(hash);
}

size_t DesktopTickets::size() const {
  std::lock_guard lock(mutex_);
  return by_hash_.size();
}

}  // namespace berth::desktop
