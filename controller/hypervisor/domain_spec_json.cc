#include "controller/hypervisor/domain_spec_json.h"

#include <cstdint>
#include <limits>
#include <string_view>

#include <fmt/format.h>

namespace berth::hypervisor {
namespace {

using nlohmann::json;

Status Text(const json& value, std::string_view key, std::string& out) {
  if (!value.is_string()) return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: want a string", key));
  out = value.get<std::string>();
  return {};
}

template <typename T>
Status Number(const json& value, std::string_view key, int64_t min, T& out) {
  const int64_t max = std::numeric_limits<T>::max();
  if (!value.is_number_integer() || value.get<int64_t>() < min || value.get<int64_t>() > max) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: want an integer in [{}, {}]", key, min, max));
  }
  out = static_cast<T>(value.get<int64_t>());
  return {};
}

Status Field(DomainSpec& s, std::string_view key, const json& v) {
  if (key == "name") return Text(v, key, s.name);
  if (key == "uuid") return Text(v, key, s.uuid);
  if (key == "vcpus") return Number(v, key, 1, s.vcpus);
  if (key == "memory_mib") return Number(v, key, 64, s.memory_mib);
  if (key == "accel") {
    std::string a;
    if (auto t = Text(v, key, a); !t) return t;
    if (a != "kvm" && a != "tcg") return Fail(ErrorCode::kInvalidArgument, "accel: want kvm or tcg");
    s.accel = a == "kvm" ? Accel::kKvm : Accel::kTcg;
    return {};
  }
  if (key == "kernel") return Text(v, key, s.kernel);
  if (key == "initrd") return Text(v, key, s.initrd);
  if (key == "cmdline") return Text(v, key, s.cmdline);
  if (key == "root_disk") return Text(v, key, s.root_disk);
  if (key == "data_disk") return Text(v, key, s.data_disk);
  if (key == "token_file") return Text(v, key, s.token_file);
  if (key == "hostname") return Text(v, key, s.hostname);
  if (key == "screen") return Text(v, key, s.screen);
  if (key == "serial_log") return Text(v, key, s.serial_log);
  if (key == "vnc_socket") return Text(v, key, s.vnc_socket);
  if (key == "agent_channel") {
    std::string c;
    if (auto t = Text(v, key, c); !t) return t;
    if (c != "forward" && c != "vsock") {
      return Fail(ErrorCode::kInvalidArgument, "agent_channel: want forward or vsock");
    }
    s.agent_channel = c == "vsock" ? AgentChannel::kVsock : AgentChannel::kForward;
    return {};
  }
  if (key == "vsock_cid") return Number(v, key, 3, s.vsock_cid);
  if (key == "passt_socket") return Text(v, key, s.passt_socket);
  if (key == "forward_port") return Number(v, key, 1, s.forward_port);
  if (key == "agent_port") return Number(v, key, 1, s.agent_port);
  if (key == "mac") return Text(v, key, s.mac);
  if (key == "run_as_uid") return Number(v, key, 0, s.run_as_uid);
  if (key == "run_as_gid") return Number(v, key, 0, s.run_as_gid);
  return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: not a field of a domain spec", key));
}

}  // namespace

Result<DomainSpec> DomainSpecFromJson(const json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "a domain spec is a JSON object");
  DomainSpec spec;
  for (const auto& [key, value] : j.items()) {
    if (auto s = Field(spec, key, value); !s) return Fail(s.error());
  }
  if (spec.name.empty() || spec.kernel.empty() || spec.root_disk.empty() || spec.token_file.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "a domain spec needs name, kernel, root_disk and token_file");
  }
  if (spec.passt_socket.empty() && spec.forward_port == 0) {
    return Fail(ErrorCode::kInvalidArgument, "a domain spec needs passt_socket or forward_port");
  }
  return spec;
}

}  // namespace berth::hypervisor
