// Watch streams: created, modified and deleted files, recursion into new directories.
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>

#include "common/client/files.h"
#include "tests/integration/files_test_util.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_agent.h"

using namespace berth;

namespace {

class Recorder {
 public:
  bool On(const protocol::WatchEvent& e) {
    std::lock_guard lock(mutex_);
    events_.push_back(e);
    return !stop_;
  }
  bool Saw(const std::string& type, const std::string& path) {
    std::lock_guard lock(mutex_);
    for (const auto& e : events_) {
      if (e.type == type && e.path == path) return true;
    }
    return false;
  }
  bool SawPrefix(const std::string& type, const std::string& prefix) {
    std::lock_guard lock(mutex_);
    for (const auto& e : events_) {
      if (e.type == type && e.path.starts_with(prefix)) return true;
    }
    return false;
  }
  void Stop() {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }

 private:
  std::mutex mutex_;
  std::vector<protocol::WatchEvent> events_;
  bool stop_ = false;
};

}  // namespace

TEST_CASE("watch reports created, modified and deleted files, recursively", "[files][watch]") {
  testing::TestAgent agent;
  testing::TempDir world("berth-watch");
  std::string dir = world.path().string();
  Recorder recorder;
  Status result;
  std::thread watcher([&] {
    auto api = agent.Client();
    result = client::Watch(api, "/v1", dir, /*recursive=*/true,
                           [&](const protocol::WatchEvent& e) { return recorder.On(e); });
  });

  // The watch is in place once a probe file is seen.
  int probe = 0;
  bool watching = testing::WaitFor([&] {
    testing::WriteFile(world / fmt::format("probe-{}", probe++), "p");
    return recorder.SawPrefix("created", world / "probe-");
  });
  if (!watching) watcher.detach();  // never returns; the test fails below
  REQUIRE(watching);

  testing::WriteFile(world / "x.txt", "hello");
  std::filesystem::remove(world / "x.txt");
  CHECK(testing::WaitFor([&] { return recorder.Saw("created", world / "x.txt"); }));
  CHECK(testing::WaitFor([&] { return recorder.Saw("modified", world / "x.txt"); }));
  CHECK(testing::WaitFor([&] { return recorder.Saw("deleted", world / "x.txt"); }));

  std::filesystem::create_directory(world / "sub");
  CHECK(testing::WaitFor([&] { return recorder.Saw("created", world / "sub"); }));
  // The new directory is watched too (retry: the watch is added right after its creation).
  int n = 0;
  CHECK(testing::WaitFor([&] {
    testing::WriteFile(world / fmt::format("sub/y-{}", n++), "y");
    return recorder.SawPrefix("created", world / "sub/y-");
  }));
  std::filesystem::rename(world / "sub/y-0", world / "moved");
  CHECK(testing::WaitFor([&] { return recorder.Saw("moved_from", world / "sub/y-0"); }));
  CHECK(testing::WaitFor([&] { return recorder.Saw("moved_to", world / "moved"); }));

  recorder.Stop();
  testing::WriteFile(world / "last", "z");  // the next event ends the watch
  watcher.join();
  CHECK(result);
}

TEST_CASE("watch ends when its directory is removed, and refuses files", "[files][watch]") {
  testing::TestAgent agent;
  testing::TempDir world("berth-watch");
  std::string dir = world / "gone";
  std::filesystem::create_directory(dir);
  Recorder recorder;
  Status result;
  std::thread watcher([&] {
    auto api = agent.Client();
    result = client::Watch(api, "/v1", dir, false,
                           [&](const protocol::WatchEvent& e) { return recorder.On(e); });
  });
  int probe = 0;
  bool watching = testing::WaitFor([&] {
    testing::WriteFile(dir + fmt::format("/p{}", probe++), "p");
    return recorder.SawPrefix("created", dir + "/p");
  });
  if (!watching) watcher.detach();
  REQUIRE(watching);
  std::filesystem::remove_all(dir);
  watcher.join();  // the stream ends by itself
  CHECK(result);
  CHECK(recorder.Saw("deleted", dir));

  auto api = agent.Client();
  testing::WriteFile(world / "file", "x");
  auto on_file = client::Watch(api, "/v1", world / "file", false,
                               [](const protocol::WatchEvent&) { return true; });
  REQUIRE_FALSE(on_file);
  CHECK(HttpStatus(on_file.error().code) == 409);
}
