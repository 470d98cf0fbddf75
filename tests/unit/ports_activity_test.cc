// The activity tracker's pure parts and its lease book-keeping.
#include <catch2/catch.hpp>

#include "guest-agent/activity.h"

using namespace berth::agent;
using namespace std::chrono_literals;

TEST_CASE("ParseProcStat sums busy and total jiffies", "[activity]") {
  auto t = ParseProcStat("cpu  186064 20770 78960 140252 4134 0 1131 1513 2 0\ncpu0 1 2 3 4\n");
  REQUIRE(t);
  CHECK(t->busy == 186064 + 20770 + 78960 + 0 + 1131 + 1513);
  CHECK(t->total == t->busy + 140252 + 4134);
  CHECK_FALSE(ParseProcStat(""));
  CHECK_FALSE(ParseProcStat("cpu0 1 2 3 4 5 6 7 8\n"));
  CHECK_FALSE(ParseProcStat("cpu  1 2 3\n"));
  CHECK_FALSE(ParseProcStat("cpu  a b c d e f g h\n"));
}

TEST_CASE("CpuPercent over a window", "[activity]") {
  CHECK(CpuPercent({100, 1000}, {150, 1100}) == Approx(50.0));
  CHECK(CpuPercent({100, 1000}, {100, 1100}) == Approx(0.0));
  CHECK(CpuPercent({100, 1000}, {100, 1000}) == 0.0);  // no time passed
  CHECK(CpuPercent({100, 1000}, {50, 900}) == 0.0);    // counters reset
}

TEST_CASE("leases appear in the snapshot with their reason, renew, expire and go", "[activity]") {
  ActivityTracker tracker;
  uint64_t id = tracker.AddLease("make test", 3600s);
  REQUIRE(id != 0);
  auto snap = tracker.Snapshot();
  REQUIRE(snap["leases"].size() == 1);
  CHECK(snap["leases"][0]["reason"] == "make test");
  CHECK(snap["leases"][0]["remaining_s"].get<int64_t>() > 3590);
  CHECK(snap["active"] == true);
  bool found = false;
  for (size_t i = 0; i < snap["reasons"].size(); ++i) {
    if (snap["reasons"][i] == "keepawake_leases") {
      found = true;
      CHECK(snap["details"][i].get<std::string>().find("make test") != std::string::npos);
    }
  }
  CHECK(found);
  CHECK(snap["reasons"].size() == snap["details"].size());

  CHECK(tracker.RenewLease(id, 10s));
  CHECK(tracker.Snapshot()["leases"][0]["remaining_s"].get<int64_t>() <= 10);
  CHECK(tracker.RemoveLease(id));
  CHECK_FALSE(tracker.RemoveLease(id));
  CHECK_FALSE(tracker.RenewLease(id, 10s));
  CHECK(tracker.Snapshot()["leases"].empty());

  uint64_t gone = tracker.AddLease("short", 0s);  // already over
  CHECK_FALSE(tracker.LeaseUntil(gone));
  CHECK(tracker.Snapshot()["leases"].empty());
}

TEST_CASE("the lease count is capped", "[activity]") {
  ActivityTracker tracker;
  for (size_t i = 0; i < ActivityTracker::kMaxLeases; ++i) REQUIRE(tracker.AddLease("x", 60s) != 0);
  CHECK(tracker.AddLease("one too many", 60s) == 0);
}

TEST_CASE("open streams are counted by kind and explained", "[activity]") {
  ActivityTracker tracker;
  {
    auto a = tracker.OpenStream("tunnel");
    auto b = tracker.OpenStream("tunnel");
    auto snap = tracker.Snapshot();
    CHECK(snap["open_streams"]["tunnel"] == 2);
    CHECK(snap["open_streams_total"] == 2);
    CHECK(snap["details"][0].get<std::string>().find("tunnel: 2") != std::string::npos);
  }
  auto snap = tracker.Snapshot();
  CHECK(snap["open_streams_total"] == 0);
  CHECK_FALSE(snap["last_request"].is_null());  // closing a stream counts as use
  CHECK(snap["cpu"]["percent"].get<double>() >= 0.0);
  CHECK(snap["cpu"]["percent"].get<double>() <= 100.0);
}
