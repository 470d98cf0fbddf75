// The workspace operations, each a coroutine on its workspace's strand, queued one after
// another (Actor::Enqueue). Every blocking call (libvirt, qemu-img, passt, files) runs on the
// blocking pool and the operation resumes on the strand; the agent is probed asynchronously.
// Between steps, the API may have moved the workspace on (a delete during a boot): after every
// step an operation re-checks the state it expects and ends quietly when it is not. When
// berthd shuts down, an operation simply stops at its next step and leaves the transitional
// state in the store for the next berthd to pick up.
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "controller/workspace/disks.h"
#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using hypervisor::DomainState;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

// The last lines of the guest's console, for an error that says why a boot failed. The guest
// writes this file: control characters are blanked, and it is read no further than `bytes`.
std::string ConsoleTail(const fs::path& log, size_t bytes = 600) {
  std::ifstream in(log, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(in.tellg());
  in.seekg(static_cast<std::streamoff>(size > bytes ? size - bytes : 0));
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : tail) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n') c = ' ';
  }
  return tail;
}

bool Up(DomainState s) { return s == DomainState::kRunning || s == DomainState::kPaused; }

// A stable MAC from the UUID: the guest keeps its interface name and DHCP lease; a fork has a
// uuid, and so a MAC, of its own.
std::string MacFor(const Workspace& ws) {
  std::string hex;
  for (char c : ws.uuid) {
    if (std::isxdigit(static_cast<unsigned char>(c))) hex.push_back(static_cast<char>(std::tolower(c)));
  }
  return fmt::format("52:54:00:{}:{}:{}", hex.substr(0, 2), hex.substr(2, 2), hex.substr(4, 2));
}

}  // namespace

hypervisor::DomainSpec WorkspaceService::SpecFor(const Workspace& ws, const ImageVersion& image) const {
  auto layout = LayoutFor(ws.id);
  hypervisor::DomainSpec spec;
  spec.name = ws.DomainName();
  spec.uuid = ws.uuid;
  spec.vcpus = ws.vcpus;
  spec.memory_mib = ws.memory_mib;
  spec.accel = kvm_ ? hypervisor::Accel::kKvm : hypervisor::Accel::kTcg;
  spec.kernel = image.kernel.string();
  spec.initrd = image.initrd.string();
  spec.root_disk = layout.root_disk(ws.disk_gen).string();
  spec.data_disk = layout.data_disk(ws.disk_gen).string();
  spec.token_file = layout.token().string();
  spec.hostname = ws.name;
  spec.screen = ws.screen;
  spec.serial_log = layout.serial_log().string();
  spec.vnc_socket = layout.vnc_socket().string();
  spec.mac = MacFor(ws);
  // The agent channel, the vsock CID and passt's socket are the transport's (BeforeStart).
  return spec;
}

Status WriteSecret(const fs::path& path, std::string_view text) {
  // Created 0600 under a temporary name and renamed: never readable by anyone else, not even
  // for a moment, and never half written.
  fs::path tmp = path;
  tmp += ".tmp";
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Fail(ErrnoError(errno, "create " + tmp.string()));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  ::close(fd);
  if (!ok) return Fail(ErrnoError(err, "write " + tmp.string()));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "rename " + tmp.string()));
  return {};
}

Status WorkspaceService::WriteToken(const Workspace& ws, const std::optional<std::string>& given) const {
  // A new 256-bit token per cold boot, in a file only berthd can read (libvirt lends it to
  // QEMU for fw_cfg; it never reaches QEMU's command line). A guest resumed from a
  // checkpoint's memory holds the token of the boot the checkpoint was taken in: `given`.
  return WriteSecret(LayoutFor(ws.id).token(), given ? *given : RandomHex(32));
}

Status WorkspaceService::AdoptToken(const Workspace& ws, const std::string& token) const {
  if (auto s = WriteToken(ws, token); !s) return s;
  std::error_code ec;
  fs::remove(LayoutFor(ws.id).next_token(), ec);
  return {};
}

Result<agent_client::AgentLink> WorkspaceService::ReadLink(const Workspace& ws) const {
  auto layout = LayoutFor(ws.id);
  auto endpoint = transport_->AgentEndpoint(ws, layout);
  if (!endpoint) return Fail(endpoint.error());
  std::ifstream in(layout.token());
  std::string token;
  std::getline(in, token);
  if (token.empty()) return Fail(ErrorCode::kUnavailable, "the workspace has no agent token yet");
  return agent_client::AgentLink{*endpoint, token};
}

Task<Result<nlohmann::json>> WorkspaceService::Probe(const agent_client::AgentLink& link,
                                                     std::chrono::milliseconds deadline) {
  co_return co_await AskAgent(options_.probe, link, deadline);
}

Task<Result<nlohmann::json>> WorkspaceService::AskAgent(const AgentCall& call, const agent_client::AgentLink& link,
                                                        std::chrono::milliseconds deadline) {
  // The deadline is enforced here, whatever the call does: one that ignores it is cut.
  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  auto probe = call(link, deadline);
  auto expire = timer.async_wait(asio::as_tuple(asio::use_awaitable));
  auto either = std::move(probe) || std::move(expire);
  auto result = co_await std::move(either);
  if (result.index() == 1) {
    co_return Fail(ErrorCode::kDeadlineExceeded,
                   fmt::format("the agent did not answer within {} ms", deadline.count()));
  }
  co_return std::get<0>(std::move(result));
}

Task<Result<DomainState>> WorkspaceService::QueryDomain(const std::string& name) {
  auto query = [this, name] { return hypervisor_.State(name); };
  co_return co_await Blocking(std::move(query));
}

Task<Status> WorkspaceService::OnHypervisor(Status (hypervisor::Hypervisor::*method)(const std::string&),
                                            const std::string& name) {
  auto call = [this, method, name] { return (hypervisor_.*method)(name); };
  co_return co_await Blocking(std::move(call));
}

Task<void> WorkspaceService::FinishCreate(ActorPtr a) {
  if (stopping_ || a->record().state != State::kCreating) co_return;
  Workspace ws = a->record();
  auto layout = LayoutFor(ws.id);
  auto prepare = [&]() -> Result<ImageVersion> {
    auto image = images_.Get(ws.image, ws.image_version);
    if (!image) return Fail(image.error());
    std::error_code ec;
    fs::create_directories(layout.dir, ec);
    if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + layout.dir.string()));
    fs::permissions(layout.dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
    auto made = ws.from_checkpoint ? MakeForkDisks(ws, layout) : options_.make_disks(*image, layout, ws.disk_gib);
    if (!made) return Fail(made.error());
    if (auto s = hypervisor_.Define(SpecFor(ws, *image)); !s) return Fail(s.error());
    return image;
  };
  auto prepared = co_await Blocking(std::move(prepare));
  if (stopping_ || a->record().state != State::kCreating) co_return;  // deleted meanwhile
  if (!prepared) {
    EnterError(*a, "create failed: " + prepared.error().message);
    co_return;
  }
  if (auto s = Transition(*a, State::kStarting, "starting", ""); !s) co_return;
  co_await Boot(a, false);
}

bool WorkspaceService::FallBackToTcg(const Actor& actor, const Error& error) {
  if (!kvm_ || options_.accel == "kvm") return false;  // KVM asked for by name: no second guess
  std::string text = error.message;
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  if (text.find("kvm") == std::string::npos) return false;
  kvm_ = false;
  boot_timeout_ = options_.boot_timeout.count() > 0 ? options_.boot_timeout : std::chrono::seconds(420);
  spdlog::warn("KVM failed a boot ({}); every guest runs under TCG from now on", error.message);
  Record(actor, "kvm_fallback", "the boot failed under KVM; booting under TCG instead",
         nlohmann::json{{"error", error.message}});
  return true;
}

Task<Status> WorkspaceService::WaitForAgent(const ActorPtr& a, std::chrono::seconds deadline) {
  Workspace ws = a->record();
  auto read = [this, ws] { return ReadLink(ws); };
  auto link = co_await Blocking(std::move(read));
  if (!link) co_return Fail(link.error());
  auto until = std::chrono::steady_clock::now() + deadline;
  Error last{ErrorCode::kUnavailable, "no answer yet"};
  auto name = ws.DomainName();
  for (int round = 0;; ++round) {
    if (stopping_) co_return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
    if (a->record().state != State::kStarting) {
      co_return Fail(ErrorCode::kFailedPrecondition, "the boot was overtaken by another operation");
    }
    auto answer = co_await Probe(*link, options_.probe_deadline);
    if (answer) {
      a->SetLink(*link);
      co_return Status{};
    }
    last = answer.error();
    // A fork's guest may hold the token its identity call gave, which a berthd killed right
    // after the call never wrote (GiveIdentity keeps it in next_token first): that one, then.
    // Only a fork yet to be given its identity can have one; other boots read no file here.
    auto adopt = [this, ws, link = *link]() -> std::optional<agent_client::AgentLink> {
      if (!ws.fresh_identity) return std::nullopt;
      std::ifstream in(LayoutFor(ws.id).next_token());
      std::string next;
      if (!std::getline(in, next) || next.empty() || next == link.token) return std::nullopt;
      return agent_client::AgentLink{link.endpoint, next};
    };
    if (auto next = co_await Blocking(std::move(adopt))) {
      if (co_await Probe(*next, options_.probe_deadline)) {
        auto write = [this, ws, token = next->token] { return AdoptToken(ws, token); };
        if (auto written = co_await Blocking(std::move(write)); !written) co_return written;
        spdlog::info("workspace {}: its agent holds the token of an identity call cut short; taken", ws.id);
        a->SetLink(*next);
        co_return Status{};
      }
    }
    // Every few rounds: is the VM still there at all? A guest that powered off or crashed
    // during boot fails now rather than at the deadline.
    if (round % 4 == 3) {
      auto state = co_await QueryDomain(name);
      if (state && !Up(*state)) {
        auto describe = [this, name, ws, state] {
          return fmt::format("the VM stopped during boot ({}); console: {}{}",
                             hypervisor::DomainStateName(*state),
                             ConsoleTail(LayoutFor(ws.id).serial_log()), hypervisor_.LogTail(name));
        };
        auto why = co_await Blocking(std::move(describe));
        co_return Fail(ErrorCode::kUnavailable, std::move(why));
      }
    }
    if (std::chrono::steady_clock::now() >= until) {
      auto describe = [this, ws, deadline, last] {
        return fmt::format("the agent did not answer within {} s ({}); console: {}", deadline.count(),
                           last.message, ConsoleTail(LayoutFor(ws.id).serial_log()));
      };
      auto why = co_await Blocking(std::move(describe));
      co_return Fail(ErrorCode::kDeadlineExceeded, std::move(why));
    }
    co_await Sleep(std::chrono::milliseconds(250));
  }
}

Task<Status> WorkspaceService::BootOnce(const ActorPtr& a, BootFrom from, int attempt) {
  const bool resume = from == BootFrom::kSave;
  Workspace ws = a->record();
  auto layout = LayoutFor(ws.id);
  // Everything up to the start, on a blocking thread: files, passt (or a host agent), libvirt.
  // The transport may choose this boot's agent port (ws.agent_port); it is stored before the
  // VM starts, so a berthd killed during the boot finds the agent again.
  struct Prepared {
    Status status;
    Workspace ws;
    hypervisor::DomainSpec spec;
    std::string memory;   // the memory image a kMemory boot resumes
    bool rebind = false;  // another workspace's (a fork's first boot)
  };
  auto prepare = [this, ws, layout, resume, from]() mutable -> Prepared {
    Prepared out{Status{}, ws, {}, {}, false};
    auto image = images_.Get(ws.image, ws.image_version);
    if (!image) {
      out.status = Fail(image.error());
      return out;
    }
    if (from == BootFrom::kMemory) {
      // The checkpoint is this workspace's (a restore) or its source's (a fork).
      auto c = store_.FindCheckpoint(*ws.resume_memory);
      if (!c) {
        out.status = Fail(c.error());
        return out;
      }
      Layout owner = LayoutFor(c->workspace_id);
      out.memory = owner.memory_file(c->id).string();
      out.rebind = c->workspace_id != ws.id;
      // The guest's agent holds the token of the boot the checkpoint was taken in; the disks
      // keep the size the guest's kernel knows.
      std::ifstream in(owner.checkpoint_token(c->id));
      std::string token;
      std::getline(in, token);
      if (token.empty()) {
        out.status = Fail(ErrorCode::kNotFound, fmt::format("checkpoint {} has no agent token", *ws.resume_memory));
        return out;
      }
      if (auto s = WriteToken(ws, token); !s) {
        out.status = s;
        return out;
      }
    } else if (!resume) {
      if (auto s = WriteToken(ws); !s) {
        out.status = s;
        return out;
      }
      // A PATCH of disk_gib (stopped) takes effect here, before the VM opens the disk; done on
      // every cold boot, so a berthd killed between the PATCH and the boot still grows it.
      if (auto s = GrowDisk(layout.data_disk(ws.disk_gen), ws.disk_gib); !s) {
        out.status = s;
        return out;
      }
    }
    out.spec = SpecFor(ws, *image);
    // The guest's network first: its uid (which the transport runs passt and QEMU under), its
    // rules and its resolver. A guest never starts unfiltered: a failure here ends the boot.
    if (options_.network) {
      if (auto s = options_.network->BeforeBoot(out.ws); !s) {
        out.status = s;
        return out;
      }
    }
    out.status = transport_->BeforeStart(out.ws, layout, resume, out.spec);
    return out;
  };
  if (!resume) a->SetLink(std::nullopt);
  auto prepared = co_await Blocking(std::move(prepare));
  if (!prepared.status) co_return prepared.status;
  if (stopping_ || a->record().state != State::kStarting) {
    co_return Fail(ErrorCode::kFailedPrecondition, "the boot was overtaken by another operation");
  }
  if (prepared.ws.agent_port != a->record().agent_port || prepared.ws.net_uid != a->record().net_uid) {
    Workspace with_port = a->record();
    with_port.agent_port = prepared.ws.agent_port;
    with_port.net_uid = prepared.ws.net_uid;  // stored by the network manager itself
    if (auto s = Commit(*a, std::move(with_port)); !s) co_return s;
  }
  auto name = ws.DomainName();
  auto spec = std::move(prepared.spec);
  auto memory = prepared.memory;
  auto scratch = prepared.rebind ? layout.rebound_memory().string() : std::string();
  auto start = [this, resume, name, spec, memory, scratch]() -> Status {
    if (!resume) {
      if (auto s = hypervisor_.Define(spec); !s) return s;
    }
    // The checkpoint's memory on the disks restored for it (Define made them the domain's).
    // Up already: a berthd killed during the restore, which libvirt finished; the agent's
    // answer (with the checkpoint's token) says whether it is that guest.
    if (!memory.empty()) {
      auto s = scratch.empty() ? hypervisor_.RestoreMemory(memory, spec)
                               : hypervisor_.RestoreMemoryAs(memory, spec, scratch);
      auto state = s ? Result<DomainState>(DomainState::kShutoff) : hypervisor_.State(name);
      if (!s && state && *state == DomainState::kRunning) return Status{};
      return s;
    }
    auto s = hypervisor_.Start(name);
    if (!s && s.error().code == ErrorCode::kFailedPrecondition) {
      // Up already, though it was not when the boot began: libvirt finished a start that a
      // berthd killed meanwhile had asked for. A resume restored the very memory this one
      // would, with the same token: it is this boot's VM. A cold boot's had the earlier token:
      // a failed attempt (destroyed, then booted again). Never "overtaken", which would end
      // the boot and leave the workspace starting for good.
      if (resume) return Status{};
      return Fail(ErrorCode::kUnavailable, fmt::format("{} was started by someone else meanwhile: {}",
                                                       name, s.error().message));
    }
    return s;
  };
  auto started = co_await Blocking(std::move(start));
  if (!started) co_return started;
  spdlog::info("workspace {}: {} (attempt {})", ws.id,
               from == BootFrom::kDisk ? "booting" : (resume ? "resuming" : "resuming a checkpoint's memory"),
               attempt);
  auto wait = from == BootFrom::kDisk ? boot_timeout_ : options_.resume_timeout;
  auto up = co_await WaitForAgent(a, wait);
  if (!up || !a->record().fresh_identity) co_return up;
  co_return co_await GiveIdentity(a, spec.mac);
}

Task<void> WorkspaceService::Boot(ActorPtr a, bool woken) {
  if (stopping_ || a->record().state != State::kStarting) co_return;
  auto started = std::chrono::steady_clock::now();
  auto name = a->record().DomainName();
  auto domain = co_await QueryDomain(name);
  if (stopping_ || a->record().state != State::kStarting) co_return;
  if (!domain) {
    EnterError(*a, domain.error().message);
    co_return;
  }
  if (*domain == DomainState::kMissing) {
    // Defined again from the record (a host that lost its libvirt definitions).
    Workspace ws = a->record();
    auto define = [this, ws]() -> Status {
      auto image = images_.Get(ws.image, ws.image_version);
      if (!image) return Fail(image.error());
      return hypervisor_.Define(SpecFor(ws, *image));
    };
    auto defined = co_await Blocking(std::move(define));
    if (stopping_ || a->record().state != State::kStarting) co_return;
    if (!defined) {
      EnterError(*a, defined.error().message);
      co_return;
    }
    domain = DomainState::kShutoff;
  }
  Status booted = Fail(ErrorCode::kInternal, "not booted");
  if (Up(*domain)) {
    if (*domain == DomainState::kPaused) {
      // Berth pauses no VM: a berthd killed during the start left it paused, its guest frozen
      // (the agent would never answer; the boot would wait out its whole deadline).
      auto resumed = co_await OnHypervisor(&hypervisor::Hypervisor::Start, name);
      if (stopping_ || a->record().state != State::kStarting) co_return;
      if (resumed) {
        spdlog::info("workspace {}: its VM was left paused by a start cut short; running it", a->id());
      } else {
        spdlog::warn("workspace {}: running its paused VM: {}", a->id(), resumed.error().message);
      }
    }
    // Already up (berthd restarted during a boot): only the agent is left to wait for (and a
    // fork's identity to give, again if it was given: the store says it was not).
    booted = co_await WaitForAgent(a, boot_timeout_);
    if (booted && a->record().fresh_identity) booted = co_await GiveIdentity(a, MacFor(a->record()));
  } else {
    bool resume = *domain == DomainState::kSaved;
    BootFrom from = resume ? BootFrom::kSave : (a->record().resume_memory ? BootFrom::kMemory : BootFrom::kDisk);
    for (int attempt = 1; attempt <= options_.boot_attempts; ++attempt) {
      BootSlots::Slot slot;
      if (from == BootFrom::kDisk) {
        // Cold boots take turns; resumes are cheap and do not wait.
        slot = co_await boot_slots_.Acquire();
        if (!slot) co_return;  // shutting down
      }
      if (stopping_ || a->record().state != State::kStarting) co_return;
      booted = co_await BootOnce(a, from, attempt);
      if (booted || stopping_) break;
      if (a->record().state != State::kStarting) co_return;  // overtaken by another operation
      // The host cannot boot it (guest network isolation not in place, say): another attempt
      // would fail the same way, so the workspace goes to error with the reason now.
      // (A memory the hypervisor refuses says nothing of the disks: they boot next.)
      if (booted.error().code == ErrorCode::kFailedPrecondition && from != BootFrom::kMemory) break;
      bool fell_back = FallBackToTcg(*a, booted.error());
      Record(*a, "boot_retry", fmt::format("attempt {} failed: {}", attempt, booted.error().message));
      Workspace ws = a->record();
      auto clean = [this, ws, resume]() {
        auto destroyed = hypervisor_.Destroy(ws.DomainName());
        if (!destroyed) spdlog::warn("workspace {}: destroy after a failed boot: {}", ws.id, destroyed.error().message);
        transport_->AfterStop(ws, LayoutFor(ws.id), false);
        if (options_.network) options_.network->AfterStop(ws);
        if (!resume) return Status{};
        // A save image that does not resume would fail every time: drop it and boot cold.
        return hypervisor_.DiscardSave(ws.DomainName());
      };
      auto cleaned = co_await Blocking(std::move(clean));
      if (stopping_ || a->record().state != State::kStarting) co_return;
      if (resume) {
        // The disks are untouched; what was in memory is lost, and the event says so.
        if (!cleaned) spdlog::warn("workspace {}: dropping the save image: {}", ws.id, cleaned.error().message);
        Record(*a, "error", "resume from hibernation failed; booting from disk instead");
        resume = false;
      }
      if (from == BootFrom::kMemory) {
        // The restored disks are the checkpoint's; its processes are lost, and the event says
        // so. The checkpoint itself is unchanged: a later restore may try its memory again.
        Workspace cold = a->record();
        cold.resume_memory.reset();
        if (auto s = Commit(*a, std::move(cold), "error",
                            "resuming the checkpoint's memory failed (" + booted.error().message +
                                "); booting from its disks instead");
            !s) {
          co_return;
        }
      }
      from = BootFrom::kDisk;
      if (fell_back) --attempt;  // the attempt under KVM says nothing of the guest
    }
  }
  if (stopping_) co_return;  // left "starting": the next berthd picks the boot up
  if (!booted) {
    if (a->record().state != State::kStarting) co_return;  // overtaken
    Workspace ws = a->record();
    auto clean = [this, ws] {
      auto destroyed = hypervisor_.Destroy(ws.DomainName());
      if (!destroyed) spdlog::warn("workspace {}: destroy after a failed boot: {}", ws.id, destroyed.error().message);
      transport_->AfterStop(ws, LayoutFor(ws.id), false);
      if (options_.network) options_.network->AfterStop(ws);
    };
    co_await Blocking(std::move(clean));
    if (stopping_ || a->record().state != State::kStarting) co_return;
    EnterError(*a, "boot failed: " + booted.error().message);
    co_return;
  }
  // The API may have moved on (a stop during the boot) while the agent came up.
  if (a->record().state != State::kStarting) co_return;
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  Workspace ws = a->record();
  ws.state = State::kRunning;
  ws.error.reset();
  bool from_memory = ws.resume_memory.has_value();
  ws.resume_memory.reset();
  ws.fresh_identity = false;  // given by this boot (BootOnce)
  ws.started_at = Now();
  ws.last_active_at = Now();
  ws.updated_at = Now();
  a->NoteActivity(Now());
  // So the API shows when it will idle from the moment it runs, not from the first idle tick.
  a->SetIdleAt(*ws.started_at + ws.idle_timeout_s);
  auto opened = store_.OpenUsage(ws, Now());
  if (!opened) spdlog::warn("usage for {}: {}", ws.id, opened.error().message);
  if (auto s = Commit(*a, ws, "started",
                      fmt::format("agent ready after {:.1f} s{}{}", secs,
                                  from_memory ? " (resumed from the checkpoint's memory)" : "",
                                  woken ? " (woken by a request)" : ""));
      !s) {
    co_return;  // the store refused: still "starting" there, and the reconciler adopts the VM
  }
}

Task<void> WorkspaceService::Stopped(const ActorPtr& a, bool saved) {
  a->SetLink(std::nullopt);
  Workspace ws = a->record();
  auto after = [this, ws, saved] {
    transport_->AfterStop(ws, LayoutFor(ws.id), saved);
    if (options_.network) options_.network->AfterStop(ws);
  };
  co_await Blocking(std::move(after));
  if (auto s = store_.CloseUsage(ws.id, Now()); !s) {
    spdlog::warn("usage for {}: {}", ws.id, s.error().message);
  }
  // Its layers are closed now: the rolling checkpoints past `keep` can go (rolling.cc), after
  // this operation.
  if (!saved && ws.checkpoints && !stopping_) asio::co_spawn(loops_, PruneRolling(a), asio::detached);
}

Task<Status> WorkspaceService::PowerOff(const ActorPtr& a, bool force) {
  auto name = a->record().DomainName();
  auto state = co_await QueryDomain(name);
  if (!state) co_return Fail(state.error());
  if (*state == DomainState::kSaved) co_return co_await OnHypervisor(&hypervisor::Hypervisor::DiscardSave, name);
  if (!Up(*state)) co_return Status{};
  if (!force && *state == DomainState::kRunning) {
    auto asked = co_await OnHypervisor(&hypervisor::Hypervisor::PressPowerButton, name);
    if (asked) {
      auto until = std::chrono::steady_clock::now() + options_.stop_grace;
      while (std::chrono::steady_clock::now() < until) {
        if (stopping_) co_return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
        auto now = co_await QueryDomain(name);
        if (now && !Up(*now)) co_return Status{};
        co_await Sleep(std::chrono::milliseconds(250));
      }
      spdlog::info("workspace {}: no power-off after {} s; pulling the plug", a->id(),
                   options_.stop_grace.count());
    } else {
      spdlog::info("workspace {}: ACPI shutdown refused ({}); pulling the plug", a->id(), asked.error().message);
    }
  }
  co_return co_await OnHypervisor(&hypervisor::Hypervisor::Destroy, name);
}

Task<void> WorkspaceService::StopOp(ActorPtr a, bool force, std::string reason) {
  if (stopping_ || a->record().state != State::kStopping) co_return;
  auto status = co_await PowerOff(a, force);
  if (stopping_) co_return;  // left "stopping": the next berthd finishes it
  if (a->record().state != State::kStopping) co_return;  // a delete took over
  if (!status) {
    EnterError(*a, "stop failed: " + status.error().message);
    co_return;
  }
  co_await Stopped(a, false);
  if (stopping_ || a->record().state != State::kStopping) co_return;
  if (auto s = Transition(*a, State::kStopped, reason, ""); !s) co_return;  // logged by Commit
}

Task<void> WorkspaceService::HibernateOp(ActorPtr a, std::string reason) {
  if (stopping_ || a->record().state != State::kHibernating) co_return;
  auto name = a->record().DomainName();
  auto saved = co_await OnHypervisor(&hypervisor::Hypervisor::Save, name);
  if (stopping_ || a->record().state != State::kHibernating) co_return;
  if (!saved) {
    auto state = co_await QueryDomain(name);
    if (stopping_ || a->record().state != State::kHibernating) co_return;
    // Saved all the same: the save a berthd killed during it had asked for went on in libvirt
    // and finished first (this one found the domain no longer running). Hibernated.
    if (state && *state == DomainState::kSaved) {
      spdlog::info("workspace {}: saved by an earlier request ({})", a->id(), saved.error().message);
      saved = Status{};
    }
  }
  if (!saved) {
    // Still running (a save that fails leaves the domain as it was): say so and carry on.
    auto state = co_await QueryDomain(name);
    if (stopping_ || a->record().state != State::kHibernating) co_return;
    bool running = state && *state == DomainState::kRunning;
    auto message = "hibernate failed: " + saved.error().message;
    if (running) {
      if (auto s = Transition(*a, State::kRunning, "error", message); !s) co_return;
    } else {
      EnterError(*a, message);
    }
    co_return;
  }
  co_await Stopped(a, true);
  if (stopping_ || a->record().state != State::kHibernating) co_return;
  if (auto s = Transition(*a, State::kHibernated, reason, ""); !s) co_return;  // logged by Commit
}

Task<void> WorkspaceService::DeleteOp(ActorPtr a) {
  if (stopping_ || a->record().state != State::kDeleting) co_return;
  Workspace ws = a->record();
  auto name = ws.DomainName();
  auto remove = [this, ws, name]() -> Status {
    if (auto s = hypervisor_.Destroy(name); !s) spdlog::warn("delete {}: {}", ws.id, s.error().message);
    // The disks stay until the domain is gone: the reconciler retries.
    if (auto s = hypervisor_.Undefine(name); !s) return s;
    transport_->AfterStop(ws, LayoutFor(ws.id), false);
    // A fork's uid reads its source's layers no more (the uid goes to another workspace later).
    if (ws.from_checkpoint && ws.net_uid) {
      ForgetSharedLayers(LayoutFor(ws.id), ws.disk_gen, static_cast<uid_t>(*ws.net_uid));
    }
    if (options_.network) {
      // Its rules and resolver go now; anything left is dropped at the next start-up.
      if (auto s = options_.network->Remove(ws); !s) spdlog::warn("delete {}: network: {}", ws.id, s.error().message);
    }
    std::error_code ec;
    fs::remove_all(LayoutFor(ws.id).dir, ec);
    if (ec) return Fail(ErrnoError(ec.value(), "delete: removing files"));
    images_.Release(ws.image, ws.image_version, ws.id);
    return {};
  };
  auto removed = co_await Blocking(std::move(remove));
  if (stopping_) co_return;
  if (!removed) {
    Record(*a, "error", "delete: " + removed.error().message);
    co_return;
  }
  a->SetLink(std::nullopt);
  if (auto s = store_.CloseUsage(ws.id, Now()); !s) spdlog::warn("usage for {}: {}", ws.id, s.error().message);
  // The row goes with its "deleted" event, in one transaction: a berthd killed between the two
  // would write the event a second time when it redoes the delete.
  store::NewEvent last{Now(), "deleted", "", nlohmann::json::object()};
  auto deleted = store_.DeleteWorkspace(ws.id, ws.tenant_id, last);
  if (!deleted) {
    // Still "deleting" in the store: the reconciler runs this again, and it finds nothing to do
    // but this.
    spdlog::error("delete {}: {}", ws.id, deleted.error().message);
    co_return;
  }
  spdlog::info("workspace {} ({}): deleted", ws.id, ws.name);
  Change line;
  line.tenant_id = ws.tenant_id;
  line.workspace_id = ws.id;
  line.event = std::move(*deleted);
  feed_.Publish(line);
  Forget(*a);
  Change gone;
  gone.tenant_id = ws.tenant_id;
  gone.workspace_id = ws.id;
  gone.deleted = true;
  feed_.Publish(gone);
}

Task<void> WorkspaceService::GuestStopped(ActorPtr a, hypervisor::DomainEventKind kind, std::string detail) {
  if (stopping_ || a->record().state != State::kRunning) co_return;
  auto name = a->record().DomainName();
  auto state = co_await QueryDomain(name);
  if (stopping_ || a->record().state != State::kRunning) co_return;
  if (state && Up(*state)) co_return;
  co_await Stopped(a, false);
  if (stopping_ || a->record().state != State::kRunning) co_return;
  Status moved = kind == hypervisor::DomainEventKind::kCrashed
                     ? Transition(*a, State::kError, "crashed", detail, "the guest crashed")
                     : Transition(*a, State::kStopped, "shutdown_by_guest", detail);
  if (!moved) co_return;  // logged by Commit
}

void WorkspaceService::OnDomainEvent(const hypervisor::DomainEvent& event) {
  // Called on the hypervisor's event thread: only look, and hand real work to the owner. The
  // events of our own stops, saves and boot retries find the workspace not running and end there.
  constexpr std::string_view kPrefix = "berth-";
  if (!event.name.starts_with(kPrefix)) return;
  if (event.kind != hypervisor::DomainEventKind::kShutdownByGuest &&
      event.kind != hypervisor::DomainEventKind::kCrashed &&
      event.kind != hypervisor::DomainEventKind::kStopped) {
    return;
  }
  auto a = FindById(event.name.substr(kPrefix.size()));
  if (!a || stopping_) return;
  auto kind = event.kind;
  std::string detail = event.detail;
  asio::post(a->strand(), [this, a, kind, detail] {
    a->Enqueue([this, a, kind, detail] { return GuestStopped(a, kind, detail); });
  });
}

}  // namespace berth::workspace
