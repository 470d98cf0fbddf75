// The files API over a real agent: streaming both ways, atomic uploads, listings and stat,
// mkdir/move/remove, users and permissions, path rules, ranges and a full disk.
#include <grp.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/client/files.h"
#include "tests/integration/files_test_util.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_agent.h"

using namespace berth;
using berth::http::bhttp::verb;
using testing::ReadFile;
using testing::WriteFile;

namespace {

constexpr std::string_view kScope = "/v1";


client::BodySource FromString(const std::string& data) {
  return [&data, offset = size_t{0}](char* buf, size_t size) mutable -> Result<size_t> {
    size_t n = std::min(size, data.size() - offset);
    std::memcpy(buf, data.data() + offset, n);
    offset += n;
    return n;
  };
}

Result<protocol::FileInfo> Put(client::ApiClient& api, const std::string& path,
                               const std::string& data, client::UploadOptions options = {}) {
  return client::Upload(api, kScope, path, FromString(data), data.size(), options);
}

Result<std::string> Get(client::ApiClient& api, const std::string& path) {
  std::string out;
  auto status = client::Download(api, kScope, path, [&](std::string_view d) -> Status {
    out.append(d);
    return {};
  });
  if (!status) return Fail(status.error());
  return out;
}

// Descriptors of this process that point into `dir` (the in-process agent's open files).
int OpenFilesUnder(const std::string& dir) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target.string().starts_with(dir + "/")) ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("upload and download round-trip with identical hashes, unix and TCP", "[files]") {
  testing::TestAgent agent;
  testing::WorldDir world;
  for (auto api : {agent.Client(), agent.TcpClient()}) {
    std::string data = testing::RandomBytes(3 * 1024 * 1024 + 17, api.endpoint().port + 1);
    std::string path = world / fmt::format("sub/dir/blob-{}.bin", api.endpoint().port);
    uint64_t last_progress = 0;
    client::UploadOptions options;
    options.progress = [&](uint64_t done, std::optional<uint64_t>) { last_progress = done; };
    auto info = Put(api, path, data, options);
    REQUIRE(info);
    CHECK(info->size == data.size());
    CHECK(info->type == "file");
    CHECK(info->mode == 0644);
    CHECK(last_progress == data.size());
    CHECK(testing::Sha256Of(ReadFile(path)) == testing::Sha256Of(data));

    auto back = Get(api, path);
    REQUIRE(back);
    CHECK(testing::Sha256Of(*back) == testing::Sha256Of(data));

    // Download into a local file, then upload a local file.
    std::string local = world / "local-copy";
    REQUIRE(client::DownloadFile(api, kScope, path, local));
    CHECK(testing::Sha256Of(ReadFile(local)) == testing::Sha256Of(data));
    auto again = client::UploadFile(api, kScope, local, world / "from-local");
    REQUIRE(again);
    CHECK(testing::Sha256Of(ReadFile(world / "from-local")) == testing::Sha256Of(data));
  }
}

TEST_CASE("uploads create parents, replace atomically and honour mode and overwrite",
          "[files]") {
  testing::TestAgent agent;
  auto api = agent.Client();
  testing::WorldDir world;
  std::string path = world / "a/b/c/file.txt";
  auto created = Put(api, path, "one");
  REQUIRE(created);
  CHECK(std::filesystem::is_directory(world / "a/b/c"));
  CHECK(ReadFile(path) == "one");

  // Status codes: 201 created, 200 replaced.
  auto raw = api.Request(verb::put, client::FilesTarget(kScope, world / "codes"), "x",
                         "application/octet-stream");
  REQUIRE(raw);
  CHECK(raw->status == 201);
  raw = api.Request(verb::put, client::FilesTarget(kScope, world / "codes"), "y",
                    "application/octet-stream");
  REQUIRE(raw);
  CHECK(raw->status == 200);

  client::UploadOptions mode_opts;
  mode_opts.mode = 0600;
  auto moded = Put(api, path, "two", mode_opts);
  REQUIRE(moded);
  CHECK(moded->mode == 0600);
  // Without a mode, a replaced file keeps its mode.
  auto kept = Put(api, path, "three");
  REQUIRE(kept);
  CHECK(kept->mode == 0600);
  CHECK(ReadFile(path) == "three");

  client::UploadOptions no_overwrite;
  no_overwrite.overwrite = false;
  auto refused = Put(api, path, "four", no_overwrite);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kAlreadyExists);
  CHECK(ReadFile(path) == "three");
  CHECK(Put(api, world / "fresh", "new", no_overwrite));

  // Uploading onto a directory is refused.
  auto onto_dir = Put(api, world / "a", "x");
  REQUIRE_FALSE(onto_dir);
  CHECK(HttpStatus(onto_dir.error().code) == 409);
  // Nothing but the files themselves is left in the directory (no temporaries).
  for (const auto& e : std::filesystem::directory_iterator(world / "a/b/c")) {
    CHECK(e.path().filename() == "file.txt");
  }
}

TEST_CASE("an aborted upload leaves neither a partial file nor a temporary", "[files]") {
  testing::TestAgent agent;
  testing::WorldDir world;
  std::string path = world / "target.txt";
  WriteFile(path, "old content");
  std::string fresh = world / "never.txt";

  for (const std::string& target : {path, fresh}) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, agent.unix_endpoint().path.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    std::string head = fmt::format(
        "PUT {} HTTP/1.1\r\nHost: berth\r\nAuthorization: Bearer {}\r\n"
        "Content-Length: 10000000\r\n\r\n",
        client::FilesTarget(kScope, target), agent.token());
    std::string body(1 << 20, 'x');
    REQUIRE(send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
    size_t sent = 0;
    while (sent < body.size()) {
      ssize_t n = send(fd, body.data() + sent, body.size() - sent, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      sent += static_cast<size_t>(n);
    }
    // The agent has started writing the upload: its temporary file is open in `world`.
    CHECK(testing::WaitFor([&] { return OpenFilesUnder(world.path().string()) > 0; }));
    close(fd);  // mid-body
    CHECK(testing::WaitFor([&] { return OpenFilesUnder(world.path().string()) == 0; }));
  }
  CHECK(ReadFile(path) == "old content");
  CHECK_FALSE(std::filesystem::exists(fresh));
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(world.path())) {
    CHECK(e.path().filename() == "target.txt");
    ++entries;
  }
  CHECK(entries == 1);
}

TEST_CASE("stat and listings report every field, sorted", "[files]") {
  testing::TestAgent agent;
  auto api = agent.Client();
  testing::WorldDir world;
  WriteFile(world / "dir/b.txt", "hello", 0640);
  WriteFile(world / "dir/a.txt", "", 0600);
  std::filesystem::create_directory(world / "dir/c-sub");
  std::filesystem::create_symlink("b.txt", world / "dir/link");

  auto info = client::Stat(api, kScope, world / "dir/b.txt");
  REQUIRE(info);
  CHECK(info->name == "b.txt");
  CHECK(info->path == world / "dir/b.txt");
  CHECK(info->type == "file");
  CHECK(info->size == 5);
  CHECK(info->mode == 0640);
  CHECK(info->uid == geteuid());
  CHECK(info->owner == testing::CurrentUserName());
  struct stat file_stat {};
  REQUIRE(::stat((world / "dir/b.txt").c_str(), &file_stat) == 0);
  const group* file_group = getgrgid(file_stat.st_gid);
  REQUIRE(file_group != nullptr);
  CHECK(info->group == file_group->gr_name);
  CHECK_FALSE(info->link_target);
  auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  CHECK(std::llabs(now_ns - info->mtime_ns) < int64_t{60} * 1'000'000'000);

  auto raw = api.Json(verb::get, client::FilesTarget(kScope, world / "dir/b.txt", {{"stat", "1"}}));
  REQUIRE(raw);
  CHECK((*raw)["mode"] == "0640");
  CHECK((*raw)["mtime"].get<std::string>().ends_with("Z"));

  auto link = client::Stat(api, kScope, world / "dir/link");
  REQUIRE(link);
  CHECK(link->type == "symlink");
  CHECK(link->link_target == "b.txt");

  auto listing = client::List(api, kScope, world / "dir/");
  REQUIRE(listing);
  CHECK(listing->path == world / "dir");
  CHECK_FALSE(listing->truncated);
  REQUIRE(listing->entries.size() == 4);
  CHECK(listing->entries[0].name == "a.txt");
  CHECK(listing->entries[1].name == "b.txt");
  CHECK(listing->entries[2].name == "c-sub");
  CHECK(listing->entries[2].type == "dir");
  CHECK(listing->entries[3].name == "link");
  CHECK(listing->entries[3].link_target == "b.txt");
  CHECK(listing->entries[1].path == world / "dir/b.txt");

  // A file's GET streams its content; a missing path is 404.
  CHECK(Get(api, world / "dir/link").value() == "hello");
  auto missing = client::Stat(api, kScope, world / "nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ErrorCode::kNotFound);
}

TEST_CASE("byte ranges", "[files]") {
  testing::TestAgent agent;
  auto api = agent.Client();
  testing::WorldDir world;
  WriteFile(world / "r", "0123456789");
  auto target = client::FilesTarget(kScope, world / "r");
  auto part = api.Request(verb::get, target, {}, {}, {{"Range", "bytes=2-5"}});
  REQUIRE(part);
  CHECK(part->status == 206);
  CHECK(part->body == "2345");
  CHECK(part->Header("Content-Range") == "bytes 2-5/10");
  auto tail = api.Request(verb::get, target, {}, {}, {{"Range", "bytes=-3"}});
  REQUIRE(tail);
  CHECK(tail->body == "789");
  auto open_end = api.Request(verb::get, target, {}, {}, {{"Range", "bytes=7-"}});
  REQUIRE(open_end);
  CHECK(open_end->body == "789");
  auto beyond = api.Request(verb::get, target, {}, {}, {{"Range", "bytes=20-30"}});
  REQUIRE(beyond);
  CHECK(beyond->status == 416);
}

TEST_CASE("mkdir, move and remove with their error cases", "[files]") {
  testing::TestAgent agent;
  auto api = agent.Client();
  testing::WorldDir world;

  auto orphan = client::Mkdir(api, kScope, world / "x/y/z");
  REQUIRE_FALSE(orphan);
  CHECK(orphan.error().code == ErrorCode::kNotFound);
  auto made = client::Mkdir(api, kScope, world / "x/y/z", /*parents=*/true, 0750);
  REQUIRE(made);
  CHECK(made->type == "dir");
  CHECK(made->mode == 0750);
  auto again = client::Mkdir(api, kScope, world / "x/y/z");
  REQUIRE_FALSE(again);
  CHECK(again.error().code == ErrorCode::kAlreadyExists);
  auto raw = api.Request(verb::post, client::FilesTarget(kScope, world / "x/y/z",
                                                         {{"op", "mkdir"}, {"parents", "1"}}));
  REQUIRE(raw);
  CHECK(raw->status == 200);
  raw = api.Request(verb::post, client::FilesTarget(kScope, world / "x/new", {{"op", "mkdir"}}));
  REQUIRE(raw);
  CHECK(raw->status == 201);

  WriteFile(world / "m1", "first");
  WriteFile(world / "m2", "second");
  auto clash = client::Move(api, kScope, world / "m1", world / "m2");
  REQUIRE_FALSE(clash);
  CHECK(clash.error().code == ErrorCode::kAlreadyExists);
  auto moved = client::Move(api, kScope, world / "m1", world / "m2", /*overwrite=*/true);
  REQUIRE(moved);
  CHECK(moved->path == world / "m2");
  CHECK(ReadFile(world / "m2") == "first");
  CHECK_FALSE(std::filesystem::exists(world / "m1"));
  auto renamed = client::Move(api, kScope, world / "m2", world / "x/y/moved");
  REQUIRE(renamed);
  CHECK(renamed->size == 5);
  auto gone = client::Move(api, kScope, world / "m1", world / "m3");
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == ErrorCode::kNotFound);
  auto bad_op = api.Request(verb::post, client::FilesTarget(kScope, world / "x", {{"op", "zap"}}));
  REQUIRE(bad_op);
  CHECK(bad_op->status == 400);

  // Remove: a non-empty directory needs recursive; symlinks inside are not followed.
  testing::WorldDir outside;
  WriteFile(outside / "keep", "precious");
  std::filesystem::create_directory_symlink(outside.path(), world / "x/y/escape");
  auto not_empty = client::Remove(api, kScope, world / "x");
  REQUIRE_FALSE(not_empty);
  CHECK(HttpStatus(not_empty.error().code) == 409);
  REQUIRE(client::Remove(api, kScope, world / "x", /*recursive=*/true));
  CHECK_FALSE(std::filesystem::exists(world / "x"));
  CHECK(ReadFile(outside / "keep") == "precious");
  auto missing = client::Remove(api, kScope, world / "x");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ErrorCode::kNotFound);
  WriteFile(world / "single", "1");
  REQUIRE(client::Remove(api, kScope, world / "single"));
  CHECK_FALSE(std::filesystem::exists(world / "single"));
  auto root = client::Remove(api, kScope, "/", true);
  REQUIRE_FALSE(root);
  CHECK(root.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("paths with '..' or relative paths are refused", "[files]") {
  testing::TestAgent agent;
  auto api = agent.Client();
  testing::WorldDir world;
  WriteFile(world / "f", "x");
  auto dotdot = client::Stat(api, kScope, world / "sub/../f");
  REQUIRE_FALSE(dotdot);
  CHECK(dotdot.error().code == ErrorCode::kInvalidArgument);
  auto upload = Put(api, world / "../escape", "x");
  REQUIRE_FALSE(upload);
  CHECK(upload.error().code == ErrorCode::kInvalidArgument);
  auto encoded = api.Request(verb::get, "/v1/files" + world / "%2E%2E/f?stat=1");
  REQUIRE(encoded);
  CHECK(encoded->status == 400);
  auto move = client::Move(api, kScope, world / "f", world / "../g");
  REQUIRE_FALSE(move);
  CHECK(move.error().code == ErrorCode::kInvalidArgument);
  // "." and duplicate slashes are normalised.
  auto dotted = client::Stat(api, kScope, world.path().string() + "//./f");
  REQUIRE(dotted);
  CHECK(dotted->path == world / "f");
}

TEST_CASE("files are written as the requested user, with that user's permissions",
          "[files][users]") {
  if (geteuid() != 0) {
    BERTH_SKIP("needs root to switch users");
  }
  testing::TestAgent agent;
  auto api = agent.Client();
  testing::WorldDir world;
  std::filesystem::create_directory(world / "shared");
  ::chmod((world / "shared").c_str(), 01777);
  std::filesystem::create_directory(world / "private");  // root-owned 0755

  client::UploadOptions as_nobody;
  as_nobody.user = "nobody";
  auto info = Put(api, world / "shared/mine/n.txt", "from nobody", as_nobody);
  REQUIRE(info);
  CHECK(info->uid == 65534);
  struct stat st {};
  REQUIRE(::stat((world / "shared/mine/n.txt").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  REQUIRE(::stat((world / "shared/mine").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);  // the parent created for the upload, too

  auto denied = Put(api, world / "private/n.txt", "x", as_nobody);
  REQUIRE_FALSE(denied);
  CHECK(denied.error().code == ErrorCode::kPermissionDenied);
  CHECK_FALSE(std::filesystem::exists(world / "private/n.txt"));

  client::FileCallOptions nobody;
  nobody.user = "nobody";
  auto mkdir_denied = client::Mkdir(api, kScope, world / "private/d", false, std::nullopt, nobody);
  REQUIRE_FALSE(mkdir_denied);
  CHECK(mkdir_denied.error().code == ErrorCode::kPermissionDenied);
  WriteFile(world / "private/secret", "s", 0600);
  std::string out;
  client::DownloadOptions download_as_nobody;
  download_as_nobody.user = "nobody";
  auto read_denied = client::Download(api, kScope, world / "private/secret",
                                      [&](std::string_view d) -> Status {
                                        out.append(d);
                                        return {};
                                      },
                                      download_as_nobody);
  REQUIRE_FALSE(read_denied);
  CHECK(read_denied.error().code == ErrorCode::kPermissionDenied);

  client::FileCallOptions as_root;
  as_root.user = "root";
  CHECK(client::Stat(api, kScope, world / "private/secret", as_root));
  client::FileCallOptions unknown;
  unknown.user = "no-such-user-berth";
  auto bad_user = client::Stat(api, kScope, world / "private", unknown);
  REQUIRE_FALSE(bad_user);
  CHECK(bad_user.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("a full disk answers 507 and leaves no temporary file", "[files][nospace]") {
  testing::WorldDir world;
  std::string mnt = world / "small";
  std::filesystem::create_directory(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=1m") != 0) {
    BERTH_SKIP("cannot mount a tmpfs here (needs root)");
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  testing::TestAgent agent;
  for (auto api : {agent.Client(), agent.TcpClient()}) {
    std::string data = testing::RandomBytes(3 * 1024 * 1024, 7);
    auto full = Put(api, mnt + "/big.bin", data);
    REQUIRE_FALSE(full);
    CHECK(full.error().code == ErrorCode::kNoSpace);
    CHECK(testing::WaitFor([&] { return OpenFilesUnder(mnt) == 0; }));
    CHECK(std::filesystem::is_empty(mnt));
    // The disk is usable again right away.
    CHECK(Put(api, mnt + "/small.txt", "fits"));
    REQUIRE(client::Remove(api, kScope, mnt + "/small.txt"));
  }
}
