// One workspace's owner (private to controller/workspace/): its record, what berthd knows of
// it at run time, and the queue of its operations, all on one strand. The service's
// operations (operations.cc) run as coroutines on this strand, one at a time; short messages
// from the API (a start, a PATCH, a new stream) run on the same strand between an operation's
// steps, so each is atomic with respect to the operations and to each other.
//
// Who may touch what:
//  - strand only: `record_` writes, the op queue, `idle_check_running_`, `boot_token_`.
//  - any thread, under `view_mutex_` (a leaf lock: nothing else is ever locked while it is
//    held): reading the record (Snapshot), activity, streams, guest reasons, idle_at, the link.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/strand.hpp>

#include "controller/store/event_filter.h"
#include <boost/asio/thread_pool.hpp>

#include "controller/agent_client/agent_link.h"
#include "controller/workspace/workspace.h"

namespace berth::workspace {

// Why a running workspace is awake, for the API.
struct AwakeInfo {
  std::vector<std::string> reasons;
  std::optional<int64_t> idle_at;  // unix seconds
};

class Actor : public std::enable_shared_from_this<Actor> {
 public:
  using Strand = boost::asio::strand<boost::asio::thread_pool::executor_type>;
  using Op = std::function<boost::asio::awaitable<void>()>;

  Actor(Strand strand, Workspace record)
      : strand_(std::move(strand)), id_(record.id), record_(std::move(record)) {}
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;

  const Strand& strand() const { return strand_; }
  const std::string& id() const { return id_; }

  // --- any thread ---------------------------------------------------------------------------
  Workspace Snapshot() const;
  State state() const;
  AwakeInfo Awake() const;
  // The agent of this boot, once it answered (cleared when the VM stops).
  std::optional<agent_client::AgentLink> link() const;
  // API traffic or a stream ending: activity at `now` (unix seconds).
  void NoteActivity(int64_t now);
  void StreamOpened(const std::string& kind, int64_t now);
  void StreamClosed(const std::string& kind, int64_t now);
  bool streams_open() const;
  int64_t last_activity() const;
  // True while an operation runs or waits to run (the idle loop leaves such a workspace be).
  bool busy() const;

  // --- strand only --------------------------------------------------------------------------
  const Workspace& record() const { return record_; }
  // Replaces the record (the caller stored it first).
  void SetRecord(Workspace record);
  void SetLink(std::optional<agent_client::AgentLink> link);
  void SetGuestReasons(std::vector<std::string> reasons);
  void SetIdleAt(std::optional<int64_t> at);
  // Activity that reached the store (last_active_at), so the idle loop writes only news.
  int64_t persisted_activity = 0;
  // The idle loop's probe of this workspace is in flight (a slow guest is not asked twice).
  bool idle_check_running = false;
  // Rolling checkpoints (rolling.cc): when the last was taken (-1: not read from the store
  // yet), and whether one is being taken or pruned now.
  int64_t last_rolling_at = -1;
  std::atomic<bool> rolling_busy{false};
  // Who the events committed now are by (store/event_filter.h): an API call's key during its
  // step (WorkspaceService::OnStrand with a `by`), berthd itself otherwise.
  std::string event_actor = std::string(store::kSystemActor);

  // Queues `op` after the operations already queued; it runs on the strand. Strand only. The
  // actor (made with make_shared) stays alive until its queue is empty.
  void Enqueue(Op op);
  // Forgets the ops still queued. Only once the service's threads have stopped: a queued op
  // holds the actor itself, and a queue nobody drains would keep it alive for ever.
  void DropQueued();
  // Ops queued or running. Strand only.
  size_t pending_ops() const { return ops_.size() + (op_running_ ? 1 : 0); }

 private:
  boost::asio::awaitable<void> Drain();

  Strand strand_;
  const std::string id_;  // never changes (a rename changes the name, not the id)

  mutable std::mutex view_mutex_;
  Workspace record_;  // written on the strand, under view_mutex_
  int64_t last_activity_ = 0;
  std::map<std::string, int> streams_;
  std::vector<std::string> guest_reasons_;
  std::optional<int64_t> idle_at_;
  std::optional<agent_client::AgentLink> link_;
  int busy_ = 0;  // mirrors pending_ops() for other threads

  std::deque<Op> ops_;
  bool op_running_ = false;
};

}  // namespace berth::workspace
