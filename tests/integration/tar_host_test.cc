// A guest's tar extracted on the host (`berth cp WS:/dir .`, possibly as root): set-id bits
// are never restored, FIFOs are left out, device nodes refused; inside the guest the agent
// keeps what a tar run by the user would. The archives are built here, entry by entry.
#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "common/client/files.h"
#include "common/tar/tar_extract.h"
#include "tests/support/fake_server.h"
#include "tests/support/temp_dir.h"

using namespace berth;

namespace {

struct TarEntry {
  std::string name;
  unsigned type = AE_IFREG;
  unsigned perm = 0644;
  std::string data;
  dev_t rdev = 0;
};

// A tar built entry by entry, owned by the user running the test: libarchive keeps set-id
// bits when the archive's owner is the extracting user, so this is the worst case for them.
std::string MakeTar(const std::vector<TarEntry>& entries) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  std::vector<char> buf(1 << 20);
  size_t used = 0;
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  for (const auto& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_filetype(entry, e.type);
    archive_entry_set_perm(entry, e.perm);
    archive_entry_set_uid(entry, geteuid());
    archive_entry_set_gid(entry, getegid());
    archive_entry_set_size(entry, static_cast<la_int64_t>(e.data.size()));
    if (e.rdev != 0) archive_entry_set_rdev(entry, e.rdev);
    REQUIRE(archive_write_header(a, entry) == ARCHIVE_OK);
    if (!e.data.empty()) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

tar::TarSource FromString(const std::string& tar) {
  return [&tar, done = false]() mutable -> Result<std::string_view> {
    if (done) return std::string_view();
    done = true;
    return std::string_view(tar);
  };
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode;
}

}  // namespace

TEST_CASE("host-side tar extraction drops set-id bits and FIFOs, refuses devices", "[hostile][tar]") {
  testing::TempDir root("berth-tar-host");
  std::string tar = MakeTar({{"bin", AE_IFDIR, 02755},
                             {"bin/suid", AE_IFREG, 04755, "#!/bin/sh\nid\n"},
                             {"bin/sgid", AE_IFREG, 02711, "x"},
                             {"fifo", AE_IFIFO, 0644},
                             {"plain", AE_IFREG, 0640, "p"}});
  std::string host = root / "host";
  std::filesystem::create_directory(host);
  auto stats = tar::ExtractTar(host, FromString(tar));  // the defaults are the host's
  REQUIRE(stats);
  CHECK(stats->entries == 4);
  CHECK(stats->skipped == 1);
  CHECK((ModeOf(host + "/bin/suid") & 07777) == 0755);
  CHECK((ModeOf(host + "/bin/sgid") & 07777) == 0711);
  CHECK((ModeOf(host + "/bin") & 07777) == 0755);
  CHECK((ModeOf(host + "/plain") & 07777) == 0640);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(host + "/fifo")));

  // Inside the guest the agent extracts as the request's user and keeps what a tar run by
  // that user would (it opts in).
  std::string guest = root / "guest";
  std::filesystem::create_directory(guest);
  tar::ExtractOptions agent_options;
  agent_options.keep_setid = true;
  agent_options.fifos = true;
  auto kept = tar::ExtractTar(guest, FromString(tar), agent_options);
  REQUIRE(kept);
  CHECK(kept->skipped == 0);
  CHECK((ModeOf(guest + "/bin/suid") & 07777) == 04755);
  CHECK(S_ISFIFO(ModeOf(guest + "/fifo")));

  // Device nodes, anywhere: refused, and nothing of them is made.
  std::string dev_tar = MakeTar({{"null", AE_IFCHR, 0666, "", makedev(1, 3)}});
  auto dev = tar::ExtractTar(host, FromString(dev_tar));
  REQUIRE_FALSE(dev);
  CHECK(dev.error().code == ErrorCode::kInvalidArgument);
  CHECK(dev.error().message == "tar entry 'null' refused: device nodes and sockets are not extracted");
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(host + "/null")));
}

TEST_CASE("berth cp WS:/dir . (DownloadTar) extracts a guest's tar with the host's rules",
          "[hostile][tar]") {
  std::string tar = MakeTar({{"suid", AE_IFREG, 06755, "x"}, {"fifo", AE_IFIFO, 0600}});
  testing::FakeServer guest([&tar](http::Exchange& ex) -> http::Task<void> {
    co_await testing::SendText(ex, "application/x-tar", tar);
  });
  testing::TempDir root("berth-cp");
  auto api = guest.Client();
  auto got = client::DownloadTar(api, "/v1", "/home/agent/dir", root / "dir");
  REQUIRE(got);
  CHECK(got->entries == 1);
  CHECK(got->skipped == 1);
  CHECK((ModeOf(root / "dir/suid") & 07777) == 0755);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(root / "dir/fifo")));
}

