#include "controller/hypervisor/save_image.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace berth::hypervisor {
namespace {

constexpr std::string_view kMagic = "LibvirtQemudSave";
constexpr std::string_view kPartialMagic = "LibvirtQemudPart";
constexpr uint32_t kVersion = 2;
constexpr uint32_t kRawFormat = 0;
constexpr uint32_t kPadding = 64 * 1024;

// The header's 32-bit fields after the magic, in the host's byte order (libvirt's struct).
enum Field { kFieldVersion, kFieldDataLen, kFieldWasRunning, kFieldFormat, kFieldCookieOffset };

uint32_t ReadField(std::string_view header, Field field) {
  uint32_t value = 0;
  std::memcpy(&value, header.data() + kMagic.size() + 4 * field, 4);
  return value;
}

void WriteField(std::string& header, Field field, uint32_t value) {
  std::memcpy(header.data() + kMagic.size() + 4 * field, &value, 4);
}

Error Bad(std::string_view what) {
  return Error{ErrorCode::kFailedPrecondition, fmt::format("not a memory image berthd can resume: {}", what)};
}

// The header alone: magic, version, format, and a data length within bounds.
Status CheckHeader(std::string_view header) {
  if (header.size() < kSaveHeaderSize) return Fail(Bad("shorter than its header"));
  std::string_view magic = header.substr(0, kMagic.size());
  if (magic == kPartialMagic) return Fail(Bad("libvirt did not finish writing it"));
  if (magic != kMagic) return Fail(Bad("no libvirt save header"));
  if (uint32_t version = ReadField(header, kFieldVersion); version != kVersion) {
    return Fail(Bad(fmt::format("header version {} (berthd reads {}, in the host's byte order)", version, kVersion)));
  }
  if (uint32_t format = ReadField(header, kFieldFormat); format != kRawFormat) {
    return Fail(Bad(fmt::format("compressed (format {})", format)));
  }
  if (uint32_t len = ReadField(header, kFieldDataLen); len == 0 || len > kMaxSaveData) {
    return Fail(Bad(fmt::format("header data of {} bytes (at most {})", len, kMaxSaveData)));
  }
  return {};
}

Status WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail(ErrorCode::kInternal, fmt::format("write the memory image's header: {}", std::strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace

Result<SaveImageHead> ParseSaveImageHead(std::string_view bytes) {
  if (auto checked = CheckHeader(bytes); !checked) return Fail(checked.error());
  SaveImageHead head;
  head.data_len = ReadField(bytes, kFieldDataLen);
  head.was_running = ReadField(bytes, kFieldWasRunning);
  uint32_t cookie_offset = ReadField(bytes, kFieldCookieOffset);
  if (bytes.size() - kSaveHeaderSize < head.data_len) return Fail(Bad("cut short in its header data"));
  std::string_view data = bytes.substr(kSaveHeaderSize, head.data_len);
  if (cookie_offset >= head.data_len) return Fail(Bad("its cookie starts past its header data"));
  std::string_view xml_part = cookie_offset == 0 ? data : data.substr(0, cookie_offset);
  size_t xml_end = xml_part.find('\0');
  if (xml_end == std::string_view::npos) return Fail(Bad("its domain XML has no end"));
  head.xml = std::string(xml_part.substr(0, xml_end));
  if (cookie_offset != 0) {
    std::string_view cookie_part = data.substr(cookie_offset);
    size_t cookie_end = cookie_part.find('\0');
    if (cookie_end == std::string_view::npos) return Fail(Bad("its cookie has no end"));
    head.cookie = std::string(cookie_part.substr(0, cookie_end));
  }
  return head;
}

Result<SaveImageHead> ReadSaveImageHead(int fd) {
  std::string bytes(kSaveHeaderSize, '\0');
  size_t have = 0;
  bool header_checked = false;
  while (have < bytes.size()) {
    ssize_t got = pread(fd, bytes.data() + have, bytes.size() - have, static_cast<off_t>(have));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Fail(ErrorCode::kInternal, fmt::format("read the memory image: {}", std::strerror(errno)));
    if (got == 0) return Fail(Bad(header_checked ? "cut short in its header data" : "shorter than its header"));
    have += static_cast<size_t>(got);
    if (have == kSaveHeaderSize && !header_checked) {
      // The length it gives is used only once the header is known to be sane.
      if (auto checked = CheckHeader(bytes); !checked) return Fail(checked.error());
      header_checked = true;
      bytes.resize(kSaveHeaderSize + ReadField(bytes, kFieldDataLen));
    }
  }
  return ParseSaveImageHead(bytes);
}

std::string EncodeSaveImageHead(const SaveImageHead& head, std::string_view xml) {
  size_t xml_len = xml.size() + 1;
  size_t cookie_len = head.cookie.empty() ? 0 : head.cookie.size() + 1;
  std::string out(kSaveHeaderSize, '\0');
  std::memcpy(out.data(), kMagic.data(), kMagic.size());
  WriteField(out, kFieldVersion, kVersion);
  WriteField(out, kFieldDataLen, static_cast<uint32_t>(xml_len + cookie_len + kPadding));
  WriteField(out, kFieldWasRunning, head.was_running);
  WriteField(out, kFieldFormat, kRawFormat);
  WriteField(out, kFieldCookieOffset, cookie_len == 0 ? 0 : static_cast<uint32_t>(xml_len));
  out.append(xml);
  out.push_back('\0');
  if (cookie_len != 0) {
    out.append(head.cookie);
    out.push_back('\0');
  }
  out.append(kPadding, '\0');
  return out;
}

Status WriteReboundImage(int image_fd, const SaveImageHead& head, std::string_view xml, int out_fd) {
  if (auto written = WriteAll(out_fd, EncodeSaveImageHead(head, xml)); !written) return written;
  auto offset = static_cast<loff_t>(head.stream_offset());
  while (true) {
    ssize_t n = copy_file_range(image_fd, &offset, out_fd, nullptr, 64 << 20, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Fail(ErrorCode::kInternal,
                  fmt::format("copy the memory image's stream at byte {}: {}", offset, std::strerror(errno)));
    }
    if (n == 0) return {};
  }
}

}  // namespace berth::hypervisor
