// libnftables, in the calling thread's network namespace: command batches applied as one
// transaction (all of it or none), and reads in JSON. Thread-safe (one mutex; libnftables
// contexts are not). Blocking (netlink round trips); call it off I/O threads.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"

struct nft_ctx;

namespace berth::network {

class Nft {
 public:
  static Result<std::unique_ptr<Nft>> Open();
  ~Nft();
  Nft(const Nft&) = delete;
  Nft& operator=(const Nft&) = delete;

  // Applies `batch` (commands in nft's language, one per line) atomically. On failure nothing
  // changed, and the error carries nft's message.
  Status Run(const std::string& batch);
  // Runs a read command ("list table inet berth") and returns nft's JSON output.
  Result<nlohmann::json> Json(const std::string& command);

 private:
  Nft(nft_ctx* text, nft_ctx* json) : text_(text), json_(json) {}
  std::mutex mutex_;
  nft_ctx* text_;
  nft_ctx* json_;
};

}  // namespace berth::network
