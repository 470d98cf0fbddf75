// Human output of `berth`: tables, ages, durations, sizes, the workspace view, progress.
#include <catch2/catch.hpp>

#include "cli/output.h"
#include "cli/progress.h"

using namespace berth;
using namespace berth::cli;

namespace {

std::chrono::system_clock::time_point At(const char* iso) { return *ParseIsoTime(iso); }

}  // namespace

TEST_CASE("tables align columns and trim the last one") {
  Table t({"NAME", "ID", "STATE"});
  t.AddRow({"api-server", "ws_1", "running"});
  t.AddRow({"db", "ws_0123456789abcdef", "stopped"});
  CHECK(t.Render() ==
        "NAME        ID                   STATE\n"
        "api-server  ws_1                 running\n"
        "db          ws_0123456789abcdef  stopped\n");
  // Width counts characters, not bytes.
  Table u({"A", "B"});
  u.AddRow({"héllo", "x"});
  CHECK(u.Render() == "A      B\nhéllo  x\n");
}

TEST_CASE("times and ages") {
  auto now = At("2026-11-29T21:45:35Z");
  CHECK(ParseIsoTime("2026-11-29T21:45:35.123456789Z") == now);
  CHECK(ParseIsoTime("2026-11-29T21:45:35+00:00") == now);
  CHECK_FALSE(ParseIsoTime("yesterday"));
  CHECK_FALSE(ParseIsoTime("2026-11-29T21:45:35+02:00"));
  CHECK(FormatAge("2026-11-29T21:45:00Z", now) == "35s");
  CHECK(FormatAge("2026-11-29T21:00:00Z", now) == "45m");
  CHECK(FormatAge("2026-11-29T10:00:00Z", now) == "11h");
  CHECK(FormatAge("2026-11-26T21:45:35Z", now) == "3d");
  CHECK(FormatAge("2026-10-01T00:00:00Z", now) == "8w");
  CHECK(FormatAge("2026-11-29T21:45:40Z", now) == "0s");  // a little clock skew
  CHECK(FormatAge("2027-01-01T00:00:00Z", now) == "-");
  CHECK(FormatAge("", now) == "-");
}

TEST_CASE("durations both ways, one parser for the CLI, the agent and MCP") {
  using std::chrono::seconds;
  CHECK(ParseDuration("90").value() == seconds(90));
  CHECK(ParseDuration("90s").value() == seconds(90));
  CHECK(ParseDuration("30m").value() == seconds(1800));
  CHECK(ParseDuration("1h30m").value() == seconds(5400));
  CHECK(ParseDuration("2d").value() == seconds(172800));
  CHECK(ParseDuration("1w").value() == seconds(604800));
  CHECK(ParseDuration("0").value() == seconds(0));
  for (std::string_view bad : {"", "h", "1h30", "5y", "-5m", "1.5h", "1h 30m", " 5", "5 ",
                               "99999999999999999999", "1000000000w"}) {
    INFO(bad);
    auto parsed = ParseDuration(bad);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().code == ErrorCode::kInvalidArgument);
    CHECK(parsed.error().message.find("examples") != std::string::npos);
  }
  // The largest accepted and one second past it.
  auto max = kMaxParsedDuration.count();
  CHECK(ParseDuration(std::to_string(max)).value() == kMaxParsedDuration);
  CHECK_FALSE(ParseDuration(std::to_string(max + 1)));
  CHECK(FormatDuration(seconds(45)) == "45s");
  CHECK(FormatDuration(seconds(1800)) == "30m");
  CHECK(FormatDuration(seconds(5400)) == "1h30m");
  CHECK(FormatDuration(seconds(3 * 86400 + 4 * 3600 + 59)) == "3d4h");
  CHECK(FormatDuration(seconds(-1)) == "-");
  // What FormatDuration prints, ParseDuration reads back (to the precision printed).
  for (int64_t n : {1, 59, 60, 61, 3599, 3600, 3660, 86400, 90061}) {
    INFO(n);
    auto back = ParseDuration(FormatDuration(seconds(n)));
    REQUIRE(back);
    CHECK(back->count() <= n);
    CHECK(back->count() > n - 3600);  // days drop minutes, hours drop seconds
  }
}

TEST_CASE("bytes and KEY=VALUE") {
  CHECK(FormatBytes(512) == "512 B");
  CHECK(FormatBytes(1536) == "1.5 KiB");
  CHECK(FormatBytes(20ull << 20) == "20.0 MiB");
  CHECK(FormatBytes(3ull << 30) == "3.0 GiB");
  auto kv = SplitKeyValue("PATH=/bin:/usr/bin=x", "--env");
  REQUIRE(kv);
  CHECK(kv->first == "PATH");
  CHECK(kv->second == "/bin:/usr/bin=x");
  CHECK(SplitKeyValue("EMPTY=", "--env").value().second.empty());
  CHECK_FALSE(SplitKeyValue("novalue", "--env"));
  CHECK_FALSE(SplitKeyValue("=v", "--env"));
}

TEST_CASE("what a checkpoint holds: disks, or memory and how long the guest paused") {
  v1::Checkpoint c;
  CHECK(CheckpointContents(c) == "disks");
  c.memory = true;
  CHECK(CheckpointContents(c) == "memory");  // berthd gave no pause
  c.pause_ms = 312;
  CHECK(CheckpointContents(c) == "memory (paused 312 ms)");
  c.memory = false;  // a pause means nothing without memory
  CHECK(CheckpointContents(c) == "disks");
}

TEST_CASE("a workspace, as ls and get show it") {
  auto now = At("2026-11-29T21:45:35Z");
  auto parsed = v1::WorkspaceFromJson(nlohmann::json::parse(R"({
    "id": "ws_0123456789abcdef", "name": "api-server", "tenant": "tn_1", "image": "base",
    "image_version": "v3", "size": "small", "cpus": 1, "memory_mib": 1024, "disk_gib": 10,
    "idle_timeout": 1800, "idle_action": "stop", "max_runtime": null, "auto_start": true,
    "env": {}, "labels": {"team": "infra"}, "state": "running", "error": null,
    "transport": "unix", "created_at": "2026-11-29T19:45:35Z",
    "updated_at": "2026-11-29T19:45:35Z", "started_at": "2026-11-29T21:40:35Z",
    "last_active_at": "2026-11-29T21:45:30Z",
    "awake": {"reasons": ["exec stream", "lease: make test"], "idle_at": "2026-11-29T22:15:30Z"}
  })"));
  REQUIRE(parsed);
  v1::Workspace ws = *parsed;
  CHECK(WorkspaceRow(ws, now) ==
        std::vector<std::string>{"api-server", "ws_0123456789abcdef", "running", "small", "base",
                                 "2h"});
  CHECK(StateLine(ws) == "api-server (ws_0123456789abcdef): running");
  std::string text = FormatWorkspace(ws, now);
  CHECK(text.find("Name:           api-server\n") != std::string::npos);
  CHECK(text.find("State:          running\n") != std::string::npos);
  CHECK(text.find("Size:           small (1 vCPU, 1024 MiB memory, 10 GiB disk)\n") !=
        std::string::npos);
  CHECK(text.find("Idle:           stop after 30m idle\n") != std::string::npos);
  CHECK(text.find("Labels:         team=infra\n") != std::string::npos);
  CHECK(text.find("Started:        2026-11-29T21:40:35Z (5m ago)\n") != std::string::npos);
  CHECK(text.find("Awake because:  exec stream, lease: make test\n") != std::string::npos);
  CHECK(text.find("Idle at:        2026-11-29T22:15:30Z\n") != std::string::npos);
  CHECK(text.find("Max runtime:    -\n") != std::string::npos);

  ws.state = v1::State::kError;
  ws.error = "boot failed";
  ws.max_runtime = 8 * 3600;
  text = FormatWorkspace(ws, now);
  CHECK(text.find("State:          error (boot failed)\n") != std::string::npos);
  CHECK(text.find("Max runtime:    8h\n") != std::string::npos);
  // Without `awake` (not running) its lines go, and the labels close up.
  ws.awake.reset();
  text = FormatWorkspace(ws, now);
  CHECK(text.find("Awake because") == std::string::npos);
  CHECK(text.find("State:        error (boot failed)\n") != std::string::npos);
  nlohmann::json object = {{"cpus", 1}, {"name", nullptr}};
  CHECK(Cell(object, "missing") == "-");
  CHECK(Cell(object, "name") == "-");
  CHECK(Cell(object, "cpus") == "1");
}

TEST_CASE("progress lines") {
  std::string known = RenderProgress("upload big", 50 << 20, 100 << 20, 10.0, 100);
  CHECK(known.find(" 50%") != std::string::npos);
  CHECK(known.find("50.0 MiB /  100.0 MiB") != std::string::npos);
  // The line keeps its length as the numbers grow, so the bar does not jump.
  CHECK(RenderProgress("upload big", 5 << 10, 100 << 20, 10.0, 100).size() == known.size());
  CHECK(known.find("5.0 MiB/s") != std::string::npos);
  CHECK(known.find("[####") != std::string::npos);
  CHECK(known.size() <= 100);
  // A tar stream can run past the files' total: never over 100%.
  CHECK(RenderProgress("x", 200, 100, 1.0, 80).find("100%") != std::string::npos);
  std::string unknown = RenderProgress("download d", 3 << 20, std::nullopt, 1.0, 80);
  CHECK(unknown == "download d  3.0 MiB  3.0 MiB/s");
}
