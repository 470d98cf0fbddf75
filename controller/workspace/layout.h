// Where a workspace's files live on the host: <data>/workspaces/<id>/ holds its two disks
// (kept until an explicit DELETE), the per-boot agent token, the console log, and run/, a
// directory owned by the QEMU user for the sockets QEMU and passt create themselves.
//
// Each disk is a chain of qcow2 layers, one per generation (checkpoints.cc): the workspace's
// `disk_gen` names the top the VM writes, and every checkpoint owns the frozen layers of its
// own generation. Generation 0 is root.qcow2/data.qcow2 (every workspace made before
// checkpoints), generation N root.gN.qcow2/data.gN.qcow2.
#pragma once

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace berth::workspace {

struct Layout {
  Layout(const std::filesystem::path& data_dir, const std::string& id)
      : dir(data_dir / "workspaces" / id) {}
  std::filesystem::path dir;
  std::filesystem::path root_disk(int64_t gen) const { return dir / LayerName("root", gen); }
  std::filesystem::path data_disk(int64_t gen) const { return dir / LayerName("data", gen); }
  // "root.qcow2" (generation 0), "root.g7.qcow2".
  static std::string LayerName(std::string_view disk, int64_t gen) {
    std::string name(disk);
    if (gen != 0) name += ".g" + std::to_string(gen);
    return name + ".qcow2";
  }
  // The generation a file name in the directory is a layer of (either disk), if it is one:
  // "root.qcow2" is 0, "data.g12.qcow2" 12; anything else (a ".tmp", "token") is none.
  static std::optional<int64_t> LayerGen(std::string_view file) {
    for (std::string_view disk : {"root", "data"}) {
      if (!file.starts_with(disk)) continue;
      std::string_view rest = file.substr(disk.size());
      if (rest == ".qcow2") return 0;
      if (!rest.starts_with(".g") || !rest.ends_with(".qcow2")) return std::nullopt;
      std::string_view digits = rest.substr(2, rest.size() - 2 - 6);
      if (digits.empty() || digits.size() > 18 || digits[0] == '0') return std::nullopt;
      for (char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
      }
      int64_t gen = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), gen);
      if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
      return gen;
    }
    return std::nullopt;
  }
  // What a checkpoint with memory keeps besides its layers (checkpoints.cc), root's, 0700: the
  // memory image libvirt wrote (and reads back: QEMU never opens it) and the agent token of
  // the boot it was taken in, which the resumed guest's agent still holds.
  std::filesystem::path checkpoints_dir() const { return dir / "checkpoints"; }
  std::filesystem::path checkpoint_dir(const std::string& id) const { return checkpoints_dir() / id; }
  std::filesystem::path memory_file(const std::string& id) const { return checkpoint_dir(id) / "memory.save"; }
  std::filesystem::path checkpoint_token(const std::string& id) const { return checkpoint_dir(id) / "token"; }
  // A fork's first boot: its source checkpoint's memory, rebound as this machine (forks.cc),
  // berthd's, 0600, removed once libvirtd has restored it (and at berthd's start).
  std::filesystem::path rebound_memory() const { return dir / "fork.save"; }
  // A diff's scratch overlays on a checkpoint's layers (diff.cc), the QEMU uid's, 0600, which
  // the guest writes only its journal replay into: "diff.from-root.qcow2". Removed after the
  // diff, and at berthd's start.
  std::filesystem::path diff_disk(std::string_view which) const {
    return dir / ("diff." + std::string(which) + ".qcow2");
  }
  // 0600, berthd's (libvirt lends it to QEMU for fw_cfg); rewritten on every cold boot.
  std::filesystem::path token() const { return dir / "token"; }
  // A fork's new agent token while its identity is being given (forks.cc), written before the
  // call: a berthd killed after the guest took it and before token() was rewritten finds it
  // here, and WaitForAgent tries it when the old one is refused.
  std::filesystem::path next_token() const { return dir / "token.next"; }
  std::filesystem::path serial_log() const { return dir / "console.log"; }
  std::filesystem::path run_dir() const { return dir / "run"; }
  std::filesystem::path vnc_socket() const { return run_dir() / "vnc.sock"; }
  std::filesystem::path passt_socket() const { return run_dir() / "passt.sock"; }
  std::filesystem::path passt_pid() const { return run_dir() / "passt.pid"; }
  std::filesystem::path passt_log() const { return run_dir() / "passt.log"; }
  // The unix transport (tests): berth-agent as a host process.
  std::filesystem::path agent_socket() const { return dir / "agent.sock"; }
  std::filesystem::path agent_pid() const { return dir / "agent.pid"; }
  std::filesystem::path agent_log() const { return dir / "agent.log"; }
  std::filesystem::path agent_root() const { return dir / "guest"; }
};

}  // namespace berth::workspace
