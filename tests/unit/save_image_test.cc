// libvirt's save image header (controller/hypervisor/save_image.h): read, refused when it is
// not one berthd can resume, rewritten with another machine, and copied with the image's
// stream byte for byte.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include <catch2/catch.hpp>

#include "controller/hypervisor/save_image.h"

using namespace berth::hypervisor;
namespace fs = std::filesystem;

namespace {

struct Fields {
  std::string magic = "LibvirtQemudSave";
  uint32_t version = 2;
  uint32_t data_len = 0;  // 0: as libvirt sets it (the data plus 64 KiB)
  uint32_t was_running = 1;
  uint32_t format = 0;
  uint32_t cookie_offset = 0;  // 0: after the XML's NUL when there is a cookie
};

// An image as libvirt writes it: header, XML and NUL, cookie and NUL, zeros, then `stream`.
std::string Image(const std::string& xml, const std::string& cookie, const std::string& stream, Fields f = {}) {
  std::string data = xml + '\0';
  if (!cookie.empty()) {
    if (f.cookie_offset == 0) f.cookie_offset = static_cast<uint32_t>(data.size());
    data += cookie + '\0';
  }
  if (f.data_len == 0) f.data_len = static_cast<uint32_t>(data.size() + 64 * 1024);
  if (data.size() < f.data_len) data.append(f.data_len - data.size(), '\0');
  std::string out = f.magic;
  for (uint32_t v : {f.version, f.data_len, f.was_running, f.format, f.cookie_offset}) {
    out.append(reinterpret_cast<const char*>(&v), 4);
  }
  out.append(14 * 4, '\0');
  REQUIRE(out.size() == kSaveHeaderSize);
  return out + data.substr(0, f.data_len) + stream;
}

std::string RandomBytes(size_t n) {
  std::mt19937 rng(7);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

class TempFile {
 public:
  explicit TempFile(const std::string& bytes) {
    char name[] = "/tmp/berth-save-image-XXXXXX";
    fd_ = mkstemp(name);
    REQUIRE(fd_ >= 0);
    path_ = name;
    REQUIRE(write(fd_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  }
  ~TempFile() {
    close(fd_);
    unlink(path_.c_str());
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string path_;
};

std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

const std::string kXml = "<domain type='kvm'>\n  <name>berth-ws_a</name>\n</domain>\n";
const std::string kCookie = "<qemuDomainSaveCookie>\n  <cpu mode='custom'/>\n</qemuDomainSaveCookie>\n";

}  // namespace

TEST_CASE("save image: libvirt's header, XML and cookie are read, and where QEMU's stream starts", "[save_image]") {
  std::string image = Image(kXml, kCookie, "QEVM-stream");
  auto head = ParseSaveImageHead(image);
  REQUIRE(head.has_value());
  CHECK(head->xml == kXml);
  CHECK(head->cookie == kCookie);
  CHECK(head->was_running == 1);
  CHECK(head->data_len == kXml.size() + 1 + kCookie.size() + 1 + 64 * 1024);
  CHECK(image.substr(head->stream_offset()) == "QEVM-stream");
  // From a file: the same.
  TempFile file(image);
  auto read = ReadSaveImageHead(file.fd());
  REQUIRE(read.has_value());
  CHECK(read->xml == kXml);
  CHECK(read->stream_offset() == head->stream_offset());
  // No cookie (libvirt writes none for some machines): the XML runs to its NUL.
  auto bare = ParseSaveImageHead(Image(kXml, "", "QEVM"));
  REQUIRE(bare.has_value());
  CHECK(bare->xml == kXml);
  CHECK(bare->cookie.empty());
}

TEST_CASE("save image: a new machine in the header keeps the cookie, the flag and libvirt's padding", "[save_image]") {
  auto head = ParseSaveImageHead(Image(kXml, kCookie, "QEVM"));
  REQUIRE(head.has_value());
  std::string other = "<domain type='kvm'>\n  <name>berth-ws_fork, a longer name than before</name>\n</domain>\n";
  std::string encoded = EncodeSaveImageHead(*head, other);
  CHECK(encoded == Image(other, kCookie, ""));
  auto again = ParseSaveImageHead(encoded + "QEVM");
  REQUIRE(again.has_value());
  CHECK(again->xml == other);
  CHECK(again->cookie == kCookie);
  CHECK(again->was_running == 1);
}

TEST_CASE("save image: headers berthd cannot resume are refused with what is wrong", "[save_image]") {
  auto refused = [](const std::string& bytes, std::string_view why) {
    auto head = ParseSaveImageHead(bytes);
    INFO(why);
    REQUIRE_FALSE(head.has_value());
    CHECK(head.error().code == berth::ErrorCode::kFailedPrecondition);
    CHECK(head.error().message.find(why) != std::string::npos);
  };
  refused(Image(kXml, kCookie, "", {.magic = "LibvirtQemudPart"}), "did not finish");
  refused(Image(kXml, kCookie, "", {.magic = "QEVM____________"}), "no libvirt save header");
  refused(Image(kXml, kCookie, "", {.version = 3}), "header version 3");
  refused(Image(kXml, kCookie, "", {.version = 0x02000000}), "header version");  // the other byte order
  refused(Image(kXml, kCookie, "", {.format = 1}), "compressed");
  refused(Image(kXml, kCookie, "", {.data_len = kMaxSaveData + 1}), "at most");
  refused(Image(kXml, kCookie, "").substr(0, 60), "shorter than its header");
  refused(Image(kXml, kCookie, "").substr(0, kSaveHeaderSize + 10), "cut short");
  std::string no_end = Image(kXml, "", "", {.data_len = static_cast<uint32_t>(kXml.size())});
  refused(no_end, "XML has no end");
  refused(Image(kXml, kCookie, "", {.cookie_offset = 1u << 20}), "cookie starts past");
}

TEST_CASE("save image: a file that claims 16 MiB of header data and has none is refused before it is read",
          "[save_image]") {
  std::string header = Image(kXml, "", "").substr(0, kSaveHeaderSize);
  uint32_t claimed = kMaxSaveData;
  std::memcpy(header.data() + 20, &claimed, 4);
  TempFile file(header);
  auto head = ReadSaveImageHead(file.fd());
  REQUIRE_FALSE(head.has_value());
  CHECK(head.error().message.find("cut short") != std::string::npos);
  TempFile empty("");
  auto none = ReadSaveImageHead(empty.fd());
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().message.find("shorter than its header") != std::string::npos);
}

TEST_CASE("save image: the rebound copy holds the new header and the image's stream byte for byte", "[save_image]") {
  std::string stream = RandomBytes((3 << 20) + 12345);  // not a multiple of a page
  TempFile file(Image(kXml, kCookie, stream));
  auto head = ReadSaveImageHead(file.fd());
  REQUIRE(head.has_value());
  std::string other = "<domain><name>berth-ws_b</name></domain>";
  TempFile out("");
  auto written = WriteReboundImage(file.fd(), *head, other, out.fd());
  REQUIRE(written.has_value());
  REQUIRE(lseek(out.fd(), 0, SEEK_SET) == 0);
  std::string got = ReadAll(out.fd());
  CHECK(got.size() == EncodeSaveImageHead(*head, other).size() + stream.size());
  CHECK(got == EncodeSaveImageHead(*head, other) + stream);
  // And it reads back as an image with the new machine and the same cookie.
  auto again = ReadSaveImageHead(out.fd());
  REQUIRE(again.has_value());
  CHECK(again->xml == other);
  CHECK(again->cookie == head->cookie);
}
