#include "guest-agent/ports_proc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace berth::agent {
namespace {

constexpr std::string_view kListenState = "0A";

bool HexToU32(std::string_view hex, uint32_t& out) {
  if (hex.size() != 8) return false;
  auto [ptr, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), out, 16);
  return ec == std::errc() && ptr == hex.data() + hex.size();
}

// "0100007F:1F90" (IPv4) or 32 hex digits and a port (IPv6) -> numeric address and port.
bool ParseAddress(std::string_view field, bool ipv6, std::string& address, uint16_t& port) {
  auto colon = field.find(':');
  if (colon == std::string_view::npos) return false;
  std::string_view hex = field.substr(0, colon);
  std::string_view port_hex = field.substr(colon + 1);
  if (port_hex.size() != 4) return false;
  auto [pptr, pec] = std::from_chars(port_hex.data(), port_hex.data() + 4, port, 16);
  if (pec != std::errc() || pptr != port_hex.data() + 4) return false;
  char text[INET6_ADDRSTRLEN] = {};
  if (!ipv6) {
    uint32_t word = 0;
    if (!HexToU32(hex, word)) return false;
    in_addr addr{};
    std::memcpy(&addr, &word, sizeof(word));  // the kernel printed the word in host order
    if (inet_ntop(AF_INET, &addr, text, sizeof(text)) == nullptr) return false;
  } else {
    if (hex.size() != 32) return false;
    in6_addr addr{};
    for (int i = 0; i < 4; ++i) {
      uint32_t word = 0;
      if (!HexToU32(hex.substr(i * 8, 8), word)) return false;
      std::memcpy(reinterpret_cast<char*>(&addr) + i * 4, &word, sizeof(word));
    }
    if (inet_ntop(AF_INET6, &addr, text, sizeof(text)) == nullptr) return false;
  }
  address = text;
  return true;
}

template <class T>
bool ParseDecimal(std::string_view text, T& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

std::string ReadSmallFile(const std::string& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  std::string out(max, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

std::string UserName(uint32_t uid) {
  passwd pw{};
  passwd* result = nullptr;
  std::vector<char> buf(16 * 1024);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &result) == 0 && result != nullptr) {
    return pw.pw_name;
  }
  return std::to_string(uid);
}

struct Owner {
  int pid = 0;
};

// Walks /proc/*/fd until every wanted inode has an owner, the fd budget is spent or the
// deadline passes. The lowest pid wins when several processes share a socket (a pre-fork
// server's parent comes first).
std::unordered_map<uint64_t, Owner> FindOwners(const std::unordered_set<uint64_t>& wanted,
                                               const PortScanLimits& limits) {
  std::unordered_map<uint64_t, Owner> found;
  auto deadline = std::chrono::steady_clock::now() + limits.deadline;
  size_t budget = limits.max_fds;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  std::vector<int> pids;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (ParseDecimal(std::string_view(e->d_name), pid)) pids.push_back(pid);
  }
  closedir(proc);
  std::sort(pids.begin(), pids.end());
  for (int pid : pids) {
    if (found.size() == wanted.size() || budget == 0 ||
        std::chrono::steady_clock::now() > deadline) {
      break;
    }
    std::string fd_dir = fmt::format("/proc/{}/fd", pid);
    DIR* fds = opendir(fd_dir.c_str());
    if (fds == nullptr) continue;  // gone, or not ours to look at
    while (dirent* e = readdir(fds)) {
      if (e->d_name[0] == '.') continue;
      if (budget-- == 0) break;
      char link[64];
      std::string path = fd_dir + "/" + e->d_name;
      ssize_t n = readlink(path.c_str(), link, sizeof(link));
      if (n <= 0) continue;
      uint64_t inode = SocketInodeFromLink(std::string_view(link, static_cast<size_t>(n)));
      if (inode != 0 && wanted.contains(inode) && !found.contains(inode)) {
        found[inode] = Owner{pid};
      }
    }
    closedir(fds);
  }
  return found;
}

}  // namespace

std::vector<ListeningSocket> ParseProcNetTcp(std::string_view text, bool ipv6) {
  std::vector<ListeningSocket> out;
  size_t line_no = 0;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line_no++ == 0) continue;  // the header
    // Fields: sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    std::vector<std::string_view> fields;
    size_t pos = 0;
    while (pos < line.size() && fields.size() < 10) {
      while (pos < line.size() && line[pos] == ' ') ++pos;
      size_t end = line.find(' ', pos);
      if (end == std::string_view::npos) end = line.size();
      if (end > pos) fields.push_back(line.substr(pos, end - pos));
      pos = end;
    }
    if (fields.size() < 10 || fields[3] != kListenState) continue;
    ListeningSocket socket;
    socket.family = ipv6 ? "ipv6" : "ipv4";
    if (!ParseAddress(fields[1], ipv6, socket.address, socket.port)) continue;
    if (!ParseDecimal(fields[7], socket.uid) || !ParseDecimal(fields[9], socket.inode)) continue;
    out.push_back(std::move(socket));
  }
  return out;
}

uint64_t SocketInodeFromLink(std::string_view link) {
  constexpr std::string_view kPrefix = "socket:[";
  if (!link.starts_with(kPrefix) || !link.ends_with(']')) return 0;
  uint64_t inode = 0;
  if (!ParseDecimal(link.substr(kPrefix.size(), link.size() - kPrefix.size() - 1), inode)) return 0;
  return inode;
}

std::string JoinCmdline(std::string_view raw, size_t max) {
  while (!raw.empty() && raw.back() == '\0') raw.remove_suffix(1);
  std::string out(raw.substr(0, max));
  std::replace(out.begin(), out.end(), '\0', ' ');
  return out;
}

std::vector<protocol::PortInfo> ListListeningPorts(const PortScanLimits& limits) {
  std::vector<ListeningSocket> sockets;
  for (bool ipv6 : {false, true}) {
    // /proc/net/tcp has one ~150-byte line per socket; 8 MiB covers ~50k sockets.
    std::string text = ReadSmallFile(ipv6 ? "/proc/net/tcp6" : "/proc/net/tcp", 8u << 20);
    auto parsed = ParseProcNetTcp(text, ipv6);
    sockets.insert(sockets.end(), parsed.begin(), parsed.end());
  }
  std::unordered_set<uint64_t> wanted;
  for (const auto& s : sockets) {
    if (s.inode != 0) wanted.insert(s.inode);
  }
  auto owners = FindOwners(wanted, limits);
  std::map<uint32_t, std::string> users;
  std::vector<protocol::PortInfo> out;
  for (const auto& s : sockets) {
    protocol::PortInfo info;
    info.port = s.port;
    info.address = s.address;
    info.family = s.family;
    auto user = users.find(s.uid);
    if (user == users.end()) user = users.emplace(s.uid, UserName(s.uid)).first;
    info.user = user->second;
    if (auto owner = owners.find(s.inode); owner != owners.end()) {
      int pid = owner->second.pid;
      info.pid = pid;
      std::string comm = ReadSmallFile(fmt::format("/proc/{}/comm", pid), 64);
      while (!comm.empty() && comm.back() == '\n') comm.pop_back();
      info.process = comm;
      info.cmdline = JoinCmdline(ReadSmallFile(fmt::format("/proc/{}/cmdline", pid), 4096));
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.port, a.family, a.address) < std::tie(b.port, b.family, b.address);
  });
  return out;
}

}  // namespace berth::agent
