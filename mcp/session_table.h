// The HTTP transport's sessions: Mcp-Session-Id → McpSession, each bound to the API key that
// created it. Bounded in number (in all and per key) and in idle time. Any thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "mcp/session.h"

namespace berth::mcp {

class SessionTable {
 public:
  using Clock = std::chrono::steady_clock;

  // `max_total` sessions in all and `max_per_key` per API key: past either, the least recently
  // used one (of that key first) is dropped. Sessions unused for `idle_ttl` are dropped too.
  SessionTable(size_t max_total, size_t max_per_key, std::chrono::seconds idle_ttl,
               std::function<Clock::time_point()> now = Clock::now);

  // Adds `session` for the key whose SHA-256 is `key_hash`; returns its new id (128 random
  // bits, hex).
  std::string Add(std::shared_ptr<McpSession> session, std::string key_hash);
  // The session `id` if it exists and belongs to `key_hash` (another key's session is as good
  // as missing); marks it used.
  std::shared_ptr<McpSession> Find(std::string_view id, std::string_view key_hash);
  // Ends the session; false when there is none (for this key).
  bool Remove(std::string_view id, std::string_view key_hash);
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<McpSession> session;
    std::string key_hash;
    Clock::time_point last_used;
  };
  void DropExpiredLocked(Clock::time_point now);
  // Drops the least recently used entry, of `key_hash` only when it is not empty.
  void DropOldestLocked(std::string_view key_hash);

  const size_t max_total_;
  const size_t max_per_key_;
  const std::chrono::seconds idle_ttl_;
  std::function<Clock::time_point()> now_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace berth::mcp
