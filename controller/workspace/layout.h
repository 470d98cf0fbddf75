// Where a workspace's files live on the host: <data>/workspaces/<id>/ holds its two disks
// (kept until an explicit DELETE), the per-boot agent token, the console log, and run/, a
// directory owned by the QEMU user for the sockets QEMU and passt create themselves.
#pragma once

#include <filesystem>
#include <string>

namespace berth::workspace {

struct Layout {
  Layout(const std::filesystem::path& data_dir, const std::string& id)
      : dir(data_dir / "workspaces" / id) {}
  std::filesystem::path dir;
  std::filesystem::path root_disk() const { return dir / "root.qcow2"; }
  std::filesystem::path data_disk() const { return dir / "data.qcow2"; }
  // 0600, berthd's (libvirt lends it to QEMU for fw_cfg); rewritten on every cold boot.
  std::filesystem::path token() const { return dir / "token"; }
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
