// The MCP tools against FakeBackend: what each tool asks of the Backend (every create field,
// one wait instead of polling, the deadlines), what it makes of the answers, and how errors
// reach the model. No I/O.
#include <catch2/catch.hpp>

#include "common/protocol/exec.h"
#include "common/v1/checkpoint.h"
#include "mcp/fake_backend.h"
#include "mcp/session.h"
#include "mcp/tool.h"

using namespace berth;
using namespace berth::mcp;
using nlohmann::json;

namespace {

class Fixture {
 public:
  Fixture() : backend_(std::make_shared<FakeBackend>()), session_(backend_, "") {
    json init = {{"jsonrpc", "2.0"},
                 {"id", 1},
                 {"method", "initialize"},
                 {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()}}}};
    REQUIRE(session_.Handle(init));
  }

  // tools/call; the CallToolResult.
  json Call(const std::string& tool, json args) {
    json request = {{"jsonrpc", "2.0"},
                    {"id", ++id_},
                    {"method", "tools/call"},
                    {"params", {{"name", tool}, {"arguments", std::move(args)}}}};
    auto response = session_.Handle(request);
    REQUIRE(response);
    REQUIRE(response->contains("result"));
    return (*response)["result"];
  }

  FakeBackend& backend() { return *backend_; }
  McpSession& session() { return session_; }

 private:
  std::shared_ptr<FakeBackend> backend_;
  McpSession session_;
  int id_ = 1;
};

std::string Text(const json& result) {
  std::string out;
  for (const auto& block : result["content"]) out += block["text"].get<std::string>();
  return out;
}

bool IsError(const json& result) { return result.value("isError", false); }

size_t Count(const std::vector<std::string>& calls, const std::string& method) {
  return static_cast<size_t>(std::count(calls.begin(), calls.end(), method));
}

// A value of the schema's type, within its bounds.
json SampleOf(const json& spec) {
  if (spec.contains("enum")) return spec["enum"][0];
  std::string type = spec.value("type", "");
  if (type == "string") return "sample";
  if (type == "integer") return spec.value("minimum", 1);
  if (type == "boolean") return true;
  if (type == "object") return json::object();
  return nullptr;
}

}  // namespace

TEST_CASE("workspace_create sends every field its schema offers, max_runtime included",
          "[mcp][tools]") {
  Fixture f;
  json args = {{"name", "proj"},         {"image", "base"},        {"size", "medium"},
               {"disk_gib", 20},         {"idle_timeout", 600},    {"idle_action", "hibernate"},
               {"max_runtime", 8 * 3600}, {"auto_start", false},   {"env", {{"A", "1"}}},
               {"labels", {{"team", "x"}}}, {"wait", false}};
  json result = f.Call("workspace_create", args);
  INFO(Text(result));
  REQUIRE_FALSE(IsError(result));
  auto sent = f.backend().LastCreateForTest();
  REQUIRE(sent);
  CHECK(sent->name == "proj");
  CHECK(sent->size == "medium");
  CHECK(sent->disk_gib == 20);
  CHECK(sent->idle_timeout == 600);
  CHECK(sent->idle_action == v1::IdleAction::kHibernate);
  CHECK(sent->max_runtime == 8 * 3600);
  CHECK(sent->auto_start == false);
  CHECK(sent->env == v1::StringMap{{"A", "1"}});
  CHECK(sent->labels == v1::StringMap{{"team", "x"}});
  CHECK(result["structuredContent"]["max_runtime"] == 8 * 3600);
  // wait: false: no wait asked for.
  CHECK(Count(f.backend().CallsForTest(), "WaitForState") == 0);

  // Drift guard: every argument of the schema but the tool's own (and `template`, which takes
  // another request) is a field of the wire type.
  const Tool* tool = FindTool("workspace_create");
  REQUIRE(tool);
  json all = json::object();
  for (const auto& [name, spec] : tool->input_schema["properties"].items()) {
    if (name == "wait" || name == "timeout" || name == "template") continue;
    all[name] = SampleOf(spec);
  }
  auto parsed = v1::CreateWorkspaceFromJson(all);
  INFO(all.dump());
  CHECK(parsed.has_value());
}

TEST_CASE("workspace_create waits for running and becomes the session's default",
          "[mcp][tools]") {
  Fixture f;
  json result = f.Call("workspace_create", {{"name", "proj"}, {"timeout", 60}});
  INFO(Text(result));
  REQUIRE_FALSE(IsError(result));
  CHECK(result["structuredContent"]["state"] == "running");
  std::string id = result["structuredContent"]["id"];
  CHECK(f.session().state().default_workspace() == id);
  // The wait got the tool's timeout as its deadline, not more.
  auto left = f.backend().LastDeadlineForTest() - std::chrono::steady_clock::now();
  CHECK(left <= std::chrono::seconds(60));
  CHECK(left > std::chrono::seconds(50));

  // The default is used when no workspace is named.
  json ran = f.Call("exec", {{"cmd", json::array({"echo", "hi"})}});
  INFO(Text(ran));
  REQUIRE_FALSE(IsError(ran));
  CHECK(ran["structuredContent"]["stdout"] == "echo hi");

  // A name in use: the error says how to use the existing one.
  json again = f.Call("workspace_create", {{"name", "proj"}});
  CHECK(IsError(again));
  CHECK(Text(again).find("workspace_use") != std::string::npos);
}

TEST_CASE("workspace_list says when more match than it shows, and filters", "[mcp][tools]") {
  Fixture f;
  for (int i = 0; i < 5; ++i) {
    f.backend().AddWorkspaceForTest(fmt::format("ws-{}", i),
                                    i % 2 ? v1::State::kStopped : v1::State::kRunning,
                                    {{"team", i < 2 ? "a" : "b"}});
  }
  json some = f.Call("workspace_list", {{"limit", 3}});
  REQUIRE_FALSE(IsError(some));
  CHECK(some["structuredContent"]["workspaces"].size() == 3);
  CHECK(some["structuredContent"]["more"] == true);
  CHECK(Text(some).find("more exist") != std::string::npos);

  json all = f.Call("workspace_list", json::object());
  CHECK(all["structuredContent"]["workspaces"].size() == 5);
  CHECK(all["structuredContent"]["more"] == false);

  json stopped = f.Call("workspace_list", {{"state", "stopped"}});
  CHECK(stopped["structuredContent"]["workspaces"].size() == 2);
  json team = f.Call("workspace_list", {{"label", "team=a"}, {"state", "running"}});
  REQUIRE(team["structuredContent"]["workspaces"].size() == 1);
  CHECK(team["structuredContent"]["workspaces"][0]["name"] == "ws-0");

  CHECK(IsError(f.Call("workspace_list", {{"state", "asleep"}})));
  CHECK(IsError(f.Call("workspace_list", {{"label", "no-equals"}})));
}

TEST_CASE("workspace actions: already there is no error, delete forgets the default",
          "[mcp][tools]") {
  Fixture f;
  std::string id = f.backend().AddWorkspaceForTest("w", v1::State::kRunning);
  json start = f.Call("workspace_start", {{"workspace", "w"}});
  INFO(Text(start));
  CHECK_FALSE(IsError(start));
  CHECK(Text(start).find("already running") != std::string::npos);

  json stop = f.Call("workspace_stop", {{"workspace", "w"}, {"force", true}, {"wait", true}});
  INFO(Text(stop));
  REQUIRE_FALSE(IsError(stop));
  CHECK(stop["structuredContent"]["state"] == "stopped");
  CHECK(Count(f.backend().CallsForTest(), "StopWorkspace(force)") == 1);

  REQUIRE_FALSE(IsError(f.Call("workspace_use", {{"workspace", "w"}})));
  CHECK(f.session().state().default_workspace() == id);
  json del = f.Call("workspace_delete", {{"workspace", "w"}});
  REQUIRE_FALSE(IsError(del));
  CHECK(f.session().state().default_workspace().empty());
  CHECK(IsError(f.Call("workspace_get", {{"workspace", "w"}})));
}

TEST_CASE("exec keeps the head and tail of long output and gives the command its deadline",
          "[mcp][tools]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("w", v1::State::kRunning);
  f.backend().ScriptCommandsForTest([](const protocol::ExecRequest& request,
                                       const ExecEventFn& on_event) -> Result<protocol::ExitStatus> {
    CHECK(request.timeout_ms == 30'000);
    for (int i = 0; i < 1000; ++i) {
      protocol::ExecEvent out(protocol::ExecEvent::Type::kStdout);
      out.data = fmt::format("line {}\n", i);
      if (auto s = on_event(out); !s) return Fail(s.error());
    }
    protocol::ExitStatus exit;
    exit.exit_code = 3;
    return exit;
  });
  json result = f.Call("exec", {{"workspace", "w"}, {"cmd", "make"}, {"timeout", 30},
                                {"max_output", 1024}});
  INFO(Text(result));
  REQUIRE_FALSE(IsError(result));
  CHECK(result["structuredContent"]["exit_code"] == 3);
  CHECK(result["structuredContent"]["truncated"] == true);
  std::string out = result["structuredContent"]["stdout"];
  CHECK(out.starts_with("line 0\n"));
  CHECK(out.find("line 999\n") != std::string::npos);
  CHECK(out.find("bytes left out") != std::string::npos);
  // The call may last the command's timeout and then some, never less.
  auto left = f.backend().LastDeadlineForTest() - std::chrono::steady_clock::now();
  CHECK(left > std::chrono::seconds(30));

  f.backend().FailNextForTest("RunCommand", Error(ErrorCode::kUnauthenticated, "bad key"));
  json refused = f.Call("exec", {{"workspace", "w"}, {"cmd", "ls"}});
  CHECK(IsError(refused));
  CHECK(Text(refused).find("refused the API key") != std::string::npos);
}

TEST_CASE("process_output with wait asks the backend to wait once, then reads from offsets",
          "[mcp][tools]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("w", v1::State::kRunning);
  json started = f.Call("exec", {{"workspace", "w"}, {"cmd", "serve"}, {"background", true},
                                 {"tag", "srv"}});
  INFO(Text(started));
  REQUIRE_FALSE(IsError(started));
  int pid = started["structuredContent"]["pid"];
  f.backend().AppendOutputForTest("w", pid, "hello\nworld\n", "warn\n");
  f.backend().EndProcessForTest("w", pid, 0);

  json output = f.Call("process_output", {{"workspace", "w"}, {"id", "srv"}, {"wait", 5}});
  INFO(Text(output));
  REQUIRE_FALSE(IsError(output));
  auto calls = f.backend().CallsForTest();
  CHECK(Count(calls, "WaitForProcess") == 1);
  CHECK(Count(calls, "GetProcess") == 0);
  CHECK(output["structuredContent"]["stdout"] == "hello\nworld\n");
  CHECK(output["structuredContent"]["stderr"] == "warn\n");
  CHECK(output["structuredContent"]["next_stdout_offset"] == 12);

  json later = f.Call("process_output", {{"workspace", "w"}, {"id", pid}, {"stdout_offset", 6}});
  REQUIRE_FALSE(IsError(later));
  CHECK(later["structuredContent"]["stdout"] == "world\n");

  json killed = f.Call("process_kill", {{"workspace", "w"}, {"id", "srv"}});
  REQUIRE_FALSE(IsError(killed));
  CHECK(Text(killed).find("Killed the process group") != std::string::npos);
  CHECK(IsError(f.Call("process_kill", {{"workspace", "w"}, {"id", "nope"}})));
}

TEST_CASE("file tools: write, read in pieces, edit, list, delete", "[mcp][tools]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("w", v1::State::kRunning);
  json wrote = f.Call("file_write", {{"workspace", "w"}, {"path", "app/main.py"},
                                     {"content", "print('one')\nprint('two')\n"}});
  INFO(Text(wrote));
  REQUIRE_FALSE(IsError(wrote));
  CHECK(f.backend().FileForTest("w", "/workspace/app/main.py") == "print('one')\nprint('two')\n");

  json head = f.Call("file_read", {{"workspace", "w"}, {"path", "app/main.py"}, {"max_bytes", 13}});
  REQUIRE_FALSE(IsError(head));
  CHECK(head["content"][0]["text"] == "print('one')\n");
  CHECK(Text(head).find("offset=13") != std::string::npos);
  CHECK(IsError(f.Call("file_read", {{"workspace", "w"}, {"path", "app/main.py"}, {"offset", 999}})));
  json dir = f.Call("file_read", {{"workspace", "w"}, {"path", "app"}});
  CHECK(IsError(dir));
  CHECK(Text(dir).find("file_list") != std::string::npos);

  json edit = f.Call("file_edit", {{"workspace", "w"}, {"path", "app/main.py"},
                                   {"old_string", "two"}, {"new_string", "2"}});
  INFO(Text(edit));
  REQUIRE_FALSE(IsError(edit));
  CHECK(f.backend().FileForTest("w", "/workspace/app/main.py") == "print('one')\nprint('2')\n");

  json list = f.Call("file_list", {{"workspace", "w"}, {"path", "/workspace"}});
  REQUIRE_FALSE(IsError(list));
  REQUIRE(list["structuredContent"]["entries"].size() == 1);
  CHECK(list["structuredContent"]["entries"][0]["name"] == "app");

  json not_empty = f.Call("file_delete", {{"workspace", "w"}, {"path", "app"}});
  CHECK(IsError(not_empty));
  CHECK(Text(not_empty).find("recursive") != std::string::npos);
  REQUIRE_FALSE(IsError(f.Call("file_delete", {{"workspace", "w"}, {"path", "app"},
                                               {"recursive", true}})));
  CHECK_FALSE(f.backend().FileForTest("w", "/workspace/app/main.py"));
}

TEST_CASE("a workspace with auto_start off is not woken by the tools", "[mcp][tools]") {
  Fixture f;
  json made = f.Call("workspace_create", {{"name", "lazy"}, {"auto_start", false}});
  REQUIRE_FALSE(IsError(made));
  REQUIRE_FALSE(IsError(f.Call("workspace_stop", {{"workspace", "lazy"}, {"wait", true}})));
  json ran = f.Call("exec", {{"workspace", "lazy"}, {"cmd", "true"}});
  CHECK(IsError(ran));
  CHECK(Text(ran).find("failed_precondition") != std::string::npos);
  CHECK(f.Call("workspace_get", {{"workspace", "lazy"}})["structuredContent"]["state"] ==
        "stopped");
}

TEST_CASE("preview_url gives a private link with its token and expiry, and the record",
          "[mcp][tools]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("w", v1::State::kStopped);
  json result = f.Call("preview_url", {{"workspace", "w"}, {"port", 5173}});
  INFO(Text(result));
  REQUIRE_FALSE(IsError(result));
  auto request = f.backend().LastPreviewForTest();
  REQUIRE(request);
  CHECK(request->port == 5173);
  CHECK_FALSE(request->is_public);
  CHECK_FALSE(request->expires_in_s);  // berthd's default
  std::string link = result["structuredContent"]["link"];
  CHECK(link.find("berth_preview_token=") != std::string::npos);
  CHECK(Text(result).starts_with(link + "\n"));  // the link first, whole, to hand out
  CHECK(Text(result).find("Private") != std::string::npos);
  CHECK(Text(result).find("port 5173") != std::string::npos);
  CHECK(Text(result).find("until ") != std::string::npos);
  CHECK(result["structuredContent"]["port"] == 5173);
  CHECK(result["structuredContent"]["status"] == "active");
  // Making a link does not wake the workspace.
  CHECK(f.backend().GetWorkspace("w", DeadlineIn(std::chrono::seconds(5)))->state ==
        v1::State::kStopped);
}

TEST_CASE("preview_url: a public one answers the URL; expires_in takes seconds or a duration",
          "[mcp][tools]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("w", v1::State::kRunning);
  json result = f.Call("preview_url", {{"workspace", "w"}, {"port", 3000}, {"public", true},
                                       {"expires_in", "2h"}});
  INFO(Text(result));
  REQUIRE_FALSE(IsError(result));
  auto request = f.backend().LastPreviewForTest();
  REQUIRE(request);
  CHECK(request->is_public);
  CHECK(request->expires_in_s == 7200);
  std::string url = result["structuredContent"]["url"];
  CHECK(Text(result).starts_with(url + "\n"));
  CHECK(Text(result).find("Public") != std::string::npos);
  CHECK_FALSE(result["structuredContent"].contains("token"));

  REQUIRE_FALSE(IsError(f.Call("preview_url", {{"workspace", "w"}, {"port", 3000},
                                               {"expires_in", 600}})));
  CHECK(f.backend().LastPreviewForTest()->expires_in_s == 600);

  // Bad arguments never reach berthd.
  size_t calls = Count(f.backend().CallsForTest(), "CreatePreview");
  for (json bad : {json{{"workspace", "w"}, {"port", 0}},
                   json{{"workspace", "w"}, {"port", 70000}},
                   json{{"workspace", "w"}, {"port", 80}, {"expires_in", "soon"}},
                   json{{"workspace", "w"}, {"port", 80}, {"expires_in", "0s"}},
                   json{{"workspace", "w"}, {"port", 80}, {"expires_in", -5}},
                   json{{"workspace", "w"}}}) {
    INFO(bad.dump());
    CHECK(IsError(f.Call("preview_url", bad)));
  }
  CHECK(Count(f.backend().CallsForTest(), "CreatePreview") == calls);
  // berthd's refusal reaches the model.
  f.backend().FailNextForTest("CreatePreview",
                              Error{ErrorCode::kInvalidArgument, "expires_in is past 30d"});
  json refused = f.Call("preview_url", {{"workspace", "w"}, {"port", 80}, {"expires_in", "90d"}});
  CHECK(IsError(refused));
  CHECK(Text(refused).find("past 30d") != std::string::npos);
}

TEST_CASE("ports_list shows each port's preview URL when berthd gives one", "[mcp][tools]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("w", v1::State::kRunning);
  protocol::PortInfo with;
  with.port = 5173;
  with.address = "127.0.0.1";
  with.preview_url = "http://5173-w.preview.localhost:8080/";
  protocol::PortInfo without;
  without.port = 22;
  without.address = "0.0.0.0";
  f.backend().SetPortsForTest("w", {with, without});
  json result = f.Call("ports_list", {{"workspace", "w"}});
  INFO(Text(result));
  REQUIRE_FALSE(IsError(result));
  CHECK(Text(result).find("127.0.0.1:5173 (loopback only) — preview: "
                          "http://5173-w.preview.localhost:8080/\n") != std::string::npos);
  CHECK(Text(result).find("0.0.0.0:22\n") != std::string::npos);
  CHECK(Text(result).find("preview_url") != std::string::npos);
  CHECK(result["structuredContent"]["ports"][0]["preview_url"] == with.preview_url);
}

TEST_CASE("desktop_screenshot answers an image block and how its points map to the screen; desktop_act "
          "sends the actions as given and a person's hold reaches the model as an error",
          "[mcp][tools]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("desk", v1::State::kRunning);
  json shot = f.Call("desktop_screenshot", {{"workspace", "desk"}, {"scale", 0.5}});
  REQUIRE_FALSE(IsError(shot));
  REQUIRE(shot["content"].size() == 2);
  CHECK(shot["content"][0]["type"] == "text");
  std::string said = shot["content"][0]["text"];
  INFO(said);
  CHECK(said.find("1280x800") != std::string::npos);
  CHECK(said.find("(x * 2, y * 2)") != std::string::npos);
  CHECK(shot["content"][1]["type"] == "image");
  CHECK(shot["content"][1]["mimeType"] == "image/png");
  CHECK(protocol::Base64Decode(shot["content"][1]["data"].get<std::string>()).value() == "PNG 640x400");
  CHECK(shot["structuredContent"]["image"] == json{{"width", 640}, {"height", 400}});
  CHECK(IsError(f.Call("desktop_screenshot", {{"workspace", "desk"}, {"scale", 2}})));

  json actions = json::array({{{"type", "click"}, {"x", 1}, {"y", 2}}, {{"type", "type"}, {"text", "hi"}}});
  json act = f.Call("desktop_act", {{"workspace", "desk"}, {"actions", actions}});
  INFO(Text(act));
  REQUIRE_FALSE(IsError(act));
  CHECK(Text(act).find("2 action(s)") != std::string::npos);
  CHECK(f.backend().LastActionsForTest() == json{{"actions", actions}});
  f.backend().FailNextForTest("DesktopActions",
                              Error(ErrorCode::kLocked, "a person (key_x) has held the desktop since 12:00"));
  json locked = f.Call("desktop_act", {{"workspace", "desk"}, {"actions", actions}});
  CHECK(IsError(locked));
  CHECK(Text(locked).find("key_x") != std::string::npos);
  CHECK(IsError(f.Call("desktop_act", {{"workspace", "desk"}})));  // actions are required

  json control = f.Call("desktop_control", {{"workspace", "desk"}});
  REQUIRE_FALSE(IsError(control));
  CHECK(Text(control).find("You (the agent) hold the desktop") != std::string::npos);

  // desktop_clipboard: set (the way in for what typing cannot reach), then read; empty says so;
  // a locked write is the tool's error naming the person.
  json empty = f.Call("desktop_clipboard", {{"workspace", "desk"}});
  REQUIRE_FALSE(IsError(empty));
  CHECK(Text(empty).find("holds no text") != std::string::npos);
  json set = f.Call("desktop_clipboard", {{"workspace", "desk"}, {"text", "h\u00e9llo \u4e16\u754c"}});
  REQUIRE_FALSE(IsError(set));
  CHECK(Text(set).find("Put 13 byte(s)") != std::string::npos);
  CHECK(Text(set).find("ctrl+v") != std::string::npos);
  json read = f.Call("desktop_clipboard", {{"workspace", "desk"}});
  REQUIRE_FALSE(IsError(read));
  CHECK(read["structuredContent"]["text"] == "h\u00e9llo \u4e16\u754c");
  CHECK(Text(read).ends_with("h\u00e9llo \u4e16\u754c"));
  // A long clipboard is shown cut on a character, and says so.
  std::string long_text;
  for (int i = 0; i < 30000; ++i) long_text += "\u4e16";  // 90000 bytes
  REQUIRE_FALSE(IsError(f.Call("desktop_clipboard", {{"workspace", "desk"}, {"text", long_text}})));
  json cut = f.Call("desktop_clipboard", {{"workspace", "desk"}});
  CHECK(cut["structuredContent"]["truncated"] == true);
  CHECK(cut["structuredContent"]["bytes"] == 90000);
  CHECK(cut["structuredContent"]["text"].get<std::string>().size() == 65535);  // 21845 whole characters
  CHECK(Text(cut).find("(the first 65535 shown)") != std::string::npos);
  f.backend().FailNextForTest("DesktopClipboard",
                              Error(ErrorCode::kLocked, "a person (key_x) has held the desktop since 12:00"));
  json clip_locked = f.Call("desktop_clipboard", {{"workspace", "desk"}, {"text", "x"}});
  CHECK(IsError(clip_locked));
  CHECK(Text(clip_locked).find("key_x") != std::string::npos);

  // request_human: the person's page link and their note; unanswered, says so; a reason is required.
  json human = f.Call("request_human", {{"workspace", "desk"}, {"reason", "log in to the bank"}});
  INFO(Text(human));
  REQUIRE_FALSE(IsError(human));
  CHECK(Text(human).find("http://berth.test/w/desk/desktop") != std::string::npos);
  CHECK(Text(human).find("done: log in to the bank") != std::string::npos);
  CHECK(human["structuredContent"]["answered"] == true);
  json nobody = f.Call("request_human", {{"workspace", "desk"}, {"reason", "nobody"}, {"timeout_s", 5}});
  REQUIRE_FALSE(IsError(nobody));
  CHECK(Text(nobody).find("Nobody took over within 5 s") != std::string::npos);
  CHECK(IsError(f.Call("request_human", {{"workspace", "desk"}})));
  CHECK(IsError(f.Call("request_human", {{"workspace", "desk"}, {"reason", ""}})));
}

TEST_CASE("workspace_events pages the timeline with after= and says who did what",
          "[mcp][tools][timeline]") {
  Fixture f;
  std::string id = f.backend().AddWorkspaceForTest("tl", v1::State::kRunning, {});
  for (int i = 0; i < 3; ++i) {
    v1::Event e;
    e.at = 1'800'000'000 + i;
    e.type = i == 1 ? "desktop_control_released" : "exec";
    e.message = fmt::format("event {}", i);
    e.actor = i == 1 ? "key_person" : "key_agent";
    f.backend().AddEventForTest(id, e);
  }
  json first = f.Call("workspace_events", {{"workspace", "tl"}, {"limit", 2}});
  REQUIRE_FALSE(IsError(first));
  CHECK(first["structuredContent"]["events"].size() == 2);
  CHECK(first["structuredContent"]["more"] == true);
  int64_t next = first["structuredContent"]["next_after"];
  CHECK(next == 2);
  CHECK(Text(first).find("(by key_person)") != std::string::npos);
  CHECK(Text(first).find("after=2") != std::string::npos);
  json rest = f.Call("workspace_events", {{"workspace", "tl"}, {"after", next}});
  REQUIRE(rest["structuredContent"]["events"].size() == 1);
  CHECK(rest["structuredContent"]["events"][0]["message"] == "event 2");
  CHECK(rest["structuredContent"]["more"] == false);
  json released = f.Call("workspace_events", {{"workspace", "tl"}, {"type", "desktop_control_released"}});
  REQUIRE(released["structuredContent"]["events"].size() == 1);
  CHECK(released["structuredContent"]["events"][0]["actor"] == "key_person");
  json none = f.Call("workspace_events", {{"workspace", "tl"}, {"after", 3}});
  CHECK(Text(none).find("No events after 3") != std::string::npos);
}

TEST_CASE("checkpoint tools: create, list and restore a stopped workspace; restore answers the undo id",
          "[mcp][tools][checkpoints]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("cp", v1::State::kStopped, {});
  json made = f.Call("checkpoint_create", {{"workspace", "cp"}, {"name", "before-upgrade"}});
  INFO(Text(made));
  REQUIRE_FALSE(IsError(made));
  std::string id = made["structuredContent"]["id"];
  CHECK(made["structuredContent"]["name"] == "before-upgrade");
  CHECK(made["structuredContent"]["kind"] == "manual");
  CHECK(Text(made).find("checkpoint=" + id) != std::string::npos);
  json second = f.Call("checkpoint_create", {{"workspace", "cp"}});
  REQUIRE_FALSE(IsError(second));
  std::string second_id = second["structuredContent"]["id"];

  // Newest first, in the text and the JSON.
  json listed = f.Call("checkpoint_list", {{"workspace", "cp"}});
  REQUIRE_FALSE(IsError(listed));
  REQUIRE(listed["structuredContent"]["checkpoints"].size() == 2);
  CHECK(listed["structuredContent"]["checkpoints"][0]["id"] == second_id);
  CHECK(listed["structuredContent"]["checkpoints"][1]["name"] == "before-upgrade");
  CHECK(Text(listed).find("2 checkpoints of workspace cp, newest first") != std::string::npos);
  CHECK(Text(listed).find(second_id) < Text(listed).find("'before-upgrade'"));

  // By name; the undo checkpoint is taken first and named in the text.
  json restored = f.Call("checkpoint_restore", {{"workspace", "cp"}, {"checkpoint", "before-upgrade"}});
  INFO(Text(restored));
  REQUIRE_FALSE(IsError(restored));
  REQUIRE(restored["structuredContent"]["undo"].is_object());
  std::string undo = restored["structuredContent"]["undo"]["id"];
  CHECK(restored["structuredContent"]["undo"]["kind"] == "before_restore");
  CHECK(restored["structuredContent"]["workspace"]["state"] == "stopped");
  CHECK(Text(restored).find("To undo, restore checkpoint " + undo) != std::string::npos);

  // undo=false reaches the backend and takes none.
  json plain = f.Call("checkpoint_restore", {{"workspace", "cp"}, {"checkpoint", undo}, {"undo", false}});
  REQUIRE_FALSE(IsError(plain));
  CHECK(plain["structuredContent"]["undo"].is_null());
  CHECK(Count(f.backend().CallsForTest(), "RestoreCheckpoint(no undo)") == 1);
  CHECK(f.Call("checkpoint_list", {{"workspace", "cp"}})["structuredContent"]["checkpoints"].size() == 3);
}

TEST_CASE("checkpoint tools: memory=true saves a running workspace's memory, and its restore resumes it "
          "(starting, then running); of a stopped workspace it is berthd's refusal",
          "[mcp][tools][checkpoints]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("warm", v1::State::kRunning, {});
  json made = f.Call("checkpoint_create", {{"workspace", "warm"}, {"name", "mid-build"}, {"memory", true}});
  INFO(Text(made));
  REQUIRE_FALSE(IsError(made));
  CHECK(made["structuredContent"]["memory"] == true);
  CHECK(made["structuredContent"]["pause_ms"] == FakeBackend::kFakePauseMs);
  CHECK(made["structuredContent"]["taken_while"] == "running");
  CHECK(Text(made).find("memory, paused 312 ms") != std::string::npos);
  CHECK(Text(made).find("its disks and its running programs back") != std::string::npos);
  // Without memory (or memory=false), the disks only, and no pause.
  json disks = f.Call("checkpoint_create", {{"workspace", "warm"}, {"memory", false}});
  REQUIRE_FALSE(IsError(disks));
  CHECK(disks["structuredContent"]["memory"] == false);
  CHECK(disks["structuredContent"]["pause_ms"].is_null());
  CHECK(Text(disks).find("(manual, disks, ") != std::string::npos);
  json listed = f.Call("checkpoint_list", {{"workspace", "warm"}});
  CHECK(Text(listed).find("'mid-build' (manual, memory, paused 312 ms, ") != std::string::npos);

  // Restored while it runs: the undo keeps its memory too, and it is starting (its programs
  // resuming), not stopped.
  json restored = f.Call("checkpoint_restore", {{"workspace", "warm"}, {"checkpoint", "mid-build"}});
  INFO(Text(restored));
  REQUIRE_FALSE(IsError(restored));
  CHECK(restored["structuredContent"]["workspace"]["state"] == "starting");
  REQUIRE(restored["structuredContent"]["undo"].is_object());
  CHECK(restored["structuredContent"]["undo"]["kind"] == "before_restore");
  CHECK(restored["structuredContent"]["undo"]["memory"] == true);
  CHECK(Text(restored).find("it is starting") != std::string::npos);

  // Stopped: no memory to checkpoint, in berthd's words (a failed_precondition: HTTP 409).
  f.backend().AddWorkspaceForTest("cold", v1::State::kStopped, {});
  json refused = f.Call("checkpoint_create", {{"workspace", "cold"}, {"memory", true}});
  CHECK(IsError(refused));
  CHECK(Text(refused).find("failed_precondition") != std::string::npos);
  CHECK(Text(refused).find("no memory to checkpoint") != std::string::npos);
  CHECK(f.Call("checkpoint_list", {{"workspace", "cold"}})["structuredContent"]["checkpoints"].empty());

  // Drift guard: every argument of the schema but the workspace is a field of the wire type.
  const Tool* tool = FindTool("checkpoint_create");
  REQUIRE(tool);
  CHECK(tool->input_schema["properties"]["memory"]["type"] == "boolean");
  json all = json::object();
  for (const auto& [name, spec] : tool->input_schema["properties"].items()) {
    if (name != "workspace") all[name] = SampleOf(spec);
  }
  auto parsed = v1::CreateCheckpointFromJson(all);
  INFO(all.dump());
  REQUIRE(parsed.has_value());
  CHECK(parsed->memory);
}

TEST_CASE("checkpoint tools: a workspace still starting, an unknown checkpoint and a missing argument are errors "
          "a model can act on",
          "[mcp][tools][checkpoints]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("booting", v1::State::kStarting, {});
  json refused = f.Call("checkpoint_create", {{"workspace", "booting"}});
  CHECK(IsError(refused));
  CHECK(Text(refused).find("failed_precondition") != std::string::npos);
  CHECK(Text(refused).find("wait until it is running") != std::string::npos);
  f.backend().AddWorkspaceForTest("live", v1::State::kRunning, {});
  CHECK(IsError(f.Call("checkpoint_restore", {{"workspace", "live"}, {"checkpoint", "cp_nope"}})));
  json missing = f.Call("checkpoint_restore", {{"workspace", "live"}});
  CHECK(IsError(missing));
  CHECK(Text(missing).find("checkpoint") != std::string::npos);
  CHECK(Count(f.backend().CallsForTest(), "RestoreCheckpoint") == 1);  // the missing one never got there
  json unknown_ws = f.Call("checkpoint_list", {{"workspace", "nope"}});
  CHECK(IsError(unknown_ws));
  CHECK(Text(unknown_ws).find("not_found") != std::string::npos);
}

TEST_CASE("checkpoint_diff: the arguments reach the backend with a long deadline; the text lists the files and "
          "packages with +/~/- marks; the structured result is the wire diff",
          "[mcp][tools][checkpoints][diff]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("dev", v1::State::kStopped, {});
  json base = f.Call("checkpoint_create", {{"workspace", "dev"}, {"name", "base"}});
  REQUIRE_FALSE(IsError(base));
  std::string base_id = base["structuredContent"]["id"];

  json diff = f.Call("checkpoint_diff", {{"workspace", "dev"}, {"checkpoint", "base"}});
  INFO(Text(diff));
  REQUIRE_FALSE(IsError(diff));
  auto asked = f.backend().LastDiffForTest();
  REQUIRE(asked);
  CHECK(asked->ws == "dev");
  CHECK(asked->cp == "base");
  CHECK(asked->to == "current");
  CHECK(asked->max_entries == 200);
  // The guest compares, and may be booted first: longer than an ordinary call's deadline.
  auto left = f.backend().LastDeadlineForTest() - std::chrono::steady_clock::now();
  CHECK(left > ToolContext::kDefaultCallTimeout + std::chrono::seconds(300));
  // Woken to compare, as berthd does.
  CHECK(f.Call("workspace_get", {{"workspace", "dev"}})["structuredContent"]["state"] == "running");

  std::string text = Text(diff);
  CHECK(text.find("Changes from checkpoint " + base_id + " to now in workspace dev") != std::string::npos);
  CHECK(text.find("files under /workspace, /home/agent: 2 added, 1 changed, 1 removed; packages: 1 installed, "
                  "1 changed, 1 removed.") != std::string::npos);
  CHECK(text.find("+ /workspace/app/ (dir, 3 entries, 2048 bytes)\n") != std::string::npos);
  CHECK(text.find("+ /workspace/notes.txt (12 bytes)\n") != std::string::npos);
  CHECK(text.find("~ /workspace/README.md (300 bytes)\n") != std::string::npos);
  CHECK(text.find("- /home/agent/old.log (10 bytes)\n") != std::string::npos);
  CHECK(text.find("+ curl 8.5.0\n") != std::string::npos);
  CHECK(text.find("~ libc6 2.36-9 -> 2.36-10\n") != std::string::npos);
  CHECK(text.find("- nano 7.2-1\n") != std::string::npos);
  CHECK(text.find("Truncated") == std::string::npos);

  const json& wire = diff["structuredContent"];
  CHECK(wire["from"] == base_id);
  CHECK(wire["to"] == "current");
  CHECK(wire["files"]["counts"]["added"] == 2);
  CHECK(wire["files"]["added"][0]["path"] == "/workspace/app");
  CHECK(wire["files"]["added"][0]["entries"] == 3);
  CHECK(wire["packages"]["installed"][0]["name"] == "curl");
  CHECK(wire["took_ms"] == 420);
  // Exactly the wire type: it parses back.
  auto parsed = v1::CheckpointDiffFromJson(wire);
  INFO(wire.dump());
  REQUIRE(parsed.has_value());
  CHECK(parsed->result.files.changed.size() == 1);
}

TEST_CASE("checkpoint_diff: to another checkpoint, and lists cut at max_entries say how to see more",
          "[mcp][tools][checkpoints][diff]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("dev", v1::State::kRunning, {});
  REQUIRE_FALSE(IsError(f.Call("checkpoint_create", {{"workspace", "dev"}, {"name", "one"}})));
  json two = f.Call("checkpoint_create", {{"workspace", "dev"}, {"name", "two"}});
  REQUIRE_FALSE(IsError(two));
  std::string two_id = two["structuredContent"]["id"];

  json diff = f.Call("checkpoint_diff", {{"workspace", "dev"}, {"checkpoint", "one"}, {"to", "two"}, {"max_entries", 1}});
  INFO(Text(diff));
  REQUIRE_FALSE(IsError(diff));
  auto asked = f.backend().LastDiffForTest();
  REQUIRE(asked);
  CHECK(asked->to == "two");
  CHECK(asked->max_entries == 1);
  std::string text = Text(diff);
  CHECK(text.find("to checkpoint " + two_id + " in workspace dev") != std::string::npos);
  CHECK(text.find("+ /workspace/app/") != std::string::npos);
  CHECK(text.find("notes.txt") == std::string::npos);  // cut by the guest
  CHECK(text.find("2 added") != std::string::npos);    // the counts go on
  CHECK(text.find("Truncated: only 1 of 2 added files are listed (max_entries=1). Call again with a larger "
                  "max_entries (up to 10000)") != std::string::npos);
  CHECK(diff["structuredContent"]["files"]["truncated"] == true);
  CHECK(diff["structuredContent"]["to"] == two_id);

  // A walk cut at the guest's time budget, every change it found listed.
  protocol::DiffResult budget = FakeBackend::CannedDiff();
  budget.files.truncated = true;
  f.backend().SetDiffForTest(budget);
  json walked = f.Call("checkpoint_diff", {{"workspace", "dev"}, {"checkpoint", "one"}});
  INFO(Text(walked));
  CHECK(Text(walked).find("walk stopped at its time budget") != std::string::npos);

  // Nothing changed.
  protocol::DiffResult none;
  none.paths = {"/workspace"};
  f.backend().SetDiffForTest(none);
  json same = f.Call("checkpoint_diff", {{"workspace", "dev"}, {"checkpoint", "two"}});
  INFO(Text(same));
  CHECK(Text(same).find("No changes from checkpoint " + two_id + " to now in workspace dev") != std::string::npos);
}

TEST_CASE("checkpoint_diff: a huge diff's text stays bounded and long paths are cut; the structured result has "
          "every entry",
          "[mcp][tools][checkpoints][diff]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("big", v1::State::kRunning, {});
  REQUIRE_FALSE(IsError(f.Call("checkpoint_create", {{"workspace", "big"}, {"name", "base"}})));
  protocol::DiffResult big;
  big.paths = {"/workspace"};
  for (int i = 0; i < 5000; ++i) {
    big.files.added.push_back({fmt::format("/workspace/node_modules/{}/{}", i, std::string(400, 'x')), "file", 1, 0});
  }
  big.files.counts.added = 5000;
  f.backend().SetDiffForTest(big);
  json diff = f.Call("checkpoint_diff", {{"workspace", "big"}, {"checkpoint", "base"}, {"max_entries", 10000}});
  REQUIRE_FALSE(IsError(diff));
  std::string text = Text(diff);
  CHECK(text.size() < 34 * 1024);
  CHECK(text.find("5000 added") != std::string::npos);
  CHECK(text.find("more lines left out") != std::string::npos);
  CHECK(text.find(std::string(400, 'x')) == std::string::npos);
  CHECK(text.find("x... (1 bytes)") != std::string::npos);
  CHECK(diff["structuredContent"]["files"]["added"].size() == 5000);
}

TEST_CASE("checkpoint_diff: an unknown checkpoint, a missing one and a bad max_entries are tool errors",
          "[mcp][tools][checkpoints][diff]") {
  Fixture f;
  f.backend().AddWorkspaceForTest("dev", v1::State::kStopped, {});
  REQUIRE_FALSE(IsError(f.Call("checkpoint_create", {{"workspace", "dev"}, {"name", "base"}})));

  json unknown = f.Call("checkpoint_diff", {{"workspace", "dev"}, {"checkpoint", "cp_nope"}});
  CHECK(IsError(unknown));
  CHECK(Text(unknown).find("not_found") != std::string::npos);
  CHECK(Text(unknown).find("no checkpoint 'cp_nope'") != std::string::npos);
  json unknown_to = f.Call("checkpoint_diff", {{"workspace", "dev"}, {"checkpoint", "base"}, {"to", "later"}});
  CHECK(IsError(unknown_to));
  CHECK(Text(unknown_to).find("no checkpoint 'later'") != std::string::npos);
  // Refused before the workspace was woken for it.
  CHECK(f.Call("workspace_get", {{"workspace", "dev"}})["structuredContent"]["state"] == "stopped");
  CHECK(Count(f.backend().CallsForTest(), "DiffCheckpoint") == 2);

  json missing = f.Call("checkpoint_diff", {{"workspace", "dev"}});
  CHECK(IsError(missing));
  CHECK(Text(missing).find("missing required argument 'checkpoint'") != std::string::npos);
  json zero = f.Call("checkpoint_diff", {{"workspace", "dev"}, {"checkpoint", "base"}, {"max_entries", 0}});
  CHECK(IsError(zero));
  json many = f.Call("checkpoint_diff", {{"workspace", "dev"}, {"checkpoint", "base"}, {"max_entries", 10001}});
  CHECK(IsError(many));
  CHECK(Count(f.backend().CallsForTest(), "DiffCheckpoint") == 2);  // none of those got there

  f.backend().FailNextForTest("DiffCheckpoint", Error(ErrorCode::kFailedPrecondition, "auto_start is off"));
  json refused = f.Call("checkpoint_diff", {{"workspace", "dev"}, {"checkpoint", "base"}});
  CHECK(IsError(refused));
  CHECK(Text(refused).find("failed_precondition: auto_start is off") != std::string::npos);

  const Tool* tool = FindTool("checkpoint_diff");
  REQUIRE(tool);
  CHECK(tool->annotations["readOnlyHint"] == true);
  CHECK(tool->input_schema["required"] == json::array({"checkpoint"}));
  CHECK(tool->input_schema["properties"]["max_entries"]["maximum"] == protocol::kMaxDiffEntries);
}

TEST_CASE("template_list names each template and how to use it; workspace_create with template starts one from it "
          "and refuses settings the template would override",
          "[mcp][tools][templates]") {
  Fixture f;
  json none = f.Call("template_list", json::object());
  REQUIRE_FALSE(IsError(none));
  CHECK(none["structuredContent"]["templates"].empty());
  CHECK(Text(none).find("no templates") != std::string::npos);

  v1::Template t;
  t.id = "tpl_0123456789abcdef";
  t.name = "node-dev";
  t.workspace_id = "ws_src";
  t.workspace = "src";
  t.checkpoint_id = "cp_warm";
  t.image = "base";
  t.created_at = 1'700'000'000;
  f.backend().AddTemplateForTest(t);
  json listed = f.Call("template_list", json::object());
  REQUIRE_FALSE(IsError(listed));
  REQUIRE(listed["structuredContent"]["templates"].size() == 1);
  CHECK(listed["structuredContent"]["templates"][0]["name"] == "node-dev");
  CHECK(Text(listed).find("- node-dev (tpl_0123456789abcdef): image base, from workspace src, checkpoint cp_warm") !=
        std::string::npos);
  CHECK(Text(listed).find("template=NAME") != std::string::npos);

  // A setting beside the template is refused before any request: it would be ignored.
  json mixed = f.Call("workspace_create", {{"name", "app"}, {"template", "node-dev"}, {"cpus", 4}});
  CHECK(IsError(mixed));
  CHECK(Text(mixed).find("'cpus' cannot be given with 'template'") != std::string::npos);
  CHECK(Count(f.backend().CallsForTest(), "CreateFromTemplate") == 0);
  json unknown = f.Call("workspace_create", {{"name", "app"}, {"template", "nope"}, {"wait", false}});
  CHECK(IsError(unknown));
  CHECK(Text(unknown).find("no template 'nope'") != std::string::npos);

  json made = f.Call("workspace_create", {{"name", "app"}, {"template", "node-dev"}, {"wait", false}});
  INFO(Text(made));
  REQUIRE_FALSE(IsError(made));
  CHECK(made["structuredContent"]["name"] == "app");
  CHECK(made["structuredContent"]["forked_from"] == "cp_warm");
  CHECK(Count(f.backend().CallsForTest(), "CreateWorkspace") == 0);
  // It is the session's default workspace, as any created one.
  json got = f.Call("workspace_get", json::object());
  REQUIRE_FALSE(IsError(got));
  CHECK(got["structuredContent"]["name"] == "app");
}
