#include "mcp/session_table.h"

#include "common/random.h"

namespace berth::mcp {

SessionTable::SessionTable(size_t max_total, size_t max_per_key, std::chrono::seconds idle_ttl,
                           std::function<Clock::time_point()> now)
    : max_total_(std::max<size_t>(max_total, 1)),
      max_per_key_(std::max<size_t>(max_per_key, 1)),
      idle_ttl_(idle_ttl),
      now_(std::move(now)) {}

std::string SessionTable::Add(std::shared_ptr<McpSession> session, std::string key_hash) {
  std::string id = RandomHex(16);
  std::lock_guard lock(mutex_);
  auto now = now_();
  DropExpiredLocked(now);
  size_t of_key = 0;
  for (const auto& [unused, entry] : entries_) of_key += entry.key_hash == key_hash ? 1 : 0;
  if (of_key >= max_per_key_) DropOldestLocked(key_hash);
  if (entries_.size() >= max_total_) DropOldestLocked({});
  entries_[id] = Entry{std::move(session), std::move(key_hash), now};
  return id;
}

std::shared_ptr<McpSession> SessionTable::Find(std::string_view id, std::string_view key_hash) {
  std::lock_guard lock(mutex_);
  auto now = now_();
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.key_hash != key_hash) return nullptr;
  if (now - it->second.last_used > idle_ttl_) {
    entries_.erase(it);
    return nullptr;
  }
  it->second.last_used = now;
  return it->second.session;
}

bool SessionTable::Remove(std::string_view id, std::string_view key_hash) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.key_hash != key_hash) return false;
  entries_.erase(it);
  return true;
}

size_t SessionTable::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

void SessionTable::DropExpiredLocked(Clock::time_point now) {
  std::erase_if(entries_, [&](const auto& item) { return now - item.second.last_used > idle_ttl_; });
}

void SessionTable::DropOldestLocked(std::string_view key_hash) {
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (!key_hash.empty() && it->second.key_hash != key_hash) continue;
    if (oldest == entries_.end() || it->second.last_used < oldest->second.last_used) oldest = it;
  }
  if (oldest != entries_.end()) entries_.erase(oldest);
}

}  // namespace berth::mcp
