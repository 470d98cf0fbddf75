// `berth` argument parsing: the shapes scripts rely on, global flags anywhere, usage errors.
#include <sstream>

#include <catch2/catch.hpp>

#include "cli/app.h"
#include "cli/exit_codes.h"

using namespace berth;
using namespace berth::cli;

namespace {

template <class T>
T Value(const CLI::App* cmd, const std::string& name) {
  return cmd->get_option(name)->as<T>();
}

// An environment with no variables, no terminal and captured streams.
struct FakeEnv {
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  Environment Get() {
    Environment env;
    env.getenv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    env.in = &in;
    env.out = &out;
    env.err = &err;
    env.now = [] { return std::chrono::system_clock::now(); };
    return env;
  }
};

}  // namespace

TEST_CASE("create NAME --image base --size small --wait") {
  App app;
  const CLI::App* cmd = app.Parse({"create", "dev", "--image", "base", "--size", "small", "--wait",
                                   "--idle-timeout", "45m", "--label", "team=infra", "--label",
                                   "x=y"});
  CHECK(cmd->get_name() == "create");
  CHECK(Value<std::string>(cmd, "name") == "dev");
  CHECK(Value<std::string>(cmd, "--image") == "base");
  CHECK(Value<std::string>(cmd, "--size") == "small");
  CHECK(Value<bool>(cmd, "--wait"));
  CHECK(Value<std::string>(cmd, "--idle-timeout") == "45m");
  CHECK(Value<std::vector<std::string>>(cmd, "--label") ==
        std::vector<std::string>{"team=infra", "x=y"});
  CHECK_FALSE(app.globals().json);
}

TEST_CASE("exec WS -- CMD ARGS keeps the command's own flags") {
  App app;
  const CLI::App* cmd =
      app.Parse({"exec", "my-ws", "-e", "A=1", "--", "ls", "-l", "--color=never", "/tmp"});
  CHECK(cmd->get_name() == "exec");
  CHECK(Value<std::string>(cmd, "workspace") == "my-ws");
  CHECK(Value<std::vector<std::string>>(cmd, "command") ==
        std::vector<std::string>{"ls", "-l", "--color=never", "/tmp"});
  CHECK(Value<std::vector<std::string>>(cmd, "--env") == std::vector<std::string>{"A=1"});

  // Repeatable flags take one value each: the workspace after them stays positional.
  App app3;
  cmd = app3.Parse({"exec", "-e", "A=1", "-e", "B=2", "ws", "--", "env", "-0"});
  CHECK(Value<std::string>(cmd, "workspace") == "ws");
  CHECK(Value<std::vector<std::string>>(cmd, "--env") == std::vector<std::string>{"A=1", "B=2"});
  CHECK(Value<std::vector<std::string>>(cmd, "command") == std::vector<std::string>{"env", "-0"});
  App app4;
  cmd = app4.Parse({"create", "--label", "a=b", "dev"});
  CHECK(Value<std::string>(cmd, "name") == "dev");

  App app2;
  cmd = app2.Parse({"exec", "ws_0123456789abcdef", "make test && echo ok"});
  CHECK(Value<std::vector<std::string>>(cmd, "command") ==
        std::vector<std::string>{"make test && echo ok"});
}

TEST_CASE("exec without a command is a usage error") {
  App app;
  CHECK_THROWS_AS(app.Parse({"exec", "my-ws"}), CLI::ParseError);
}

TEST_CASE("global flags go before or after the command") {
  App app;
  const CLI::App* cmd = app.Parse({"ls", "--json", "--url", "http://10.0.0.1:7780"});
  CHECK(cmd->get_name() == "ls");
  CHECK(app.globals().json);
  CHECK(app.globals().url == "http://10.0.0.1:7780");

  App app2;
  cmd = app2.Parse({"--api-key", "k1", "-q", "get", "dev", "--json"});
  CHECK(cmd->get_name() == "get");
  CHECK(Value<std::string>(cmd, "workspace") == "dev");
  CHECK(app2.globals().api_key == "k1");
  CHECK(app2.globals().quiet);
  CHECK(app2.globals().json);
}

TEST_CASE("rm --yes WS, cp LOCAL WS:/path, nested admin commands") {
  App app;
  const CLI::App* cmd = app.Parse({"rm", "--yes", "dev", "other"});
  CHECK(cmd->get_name() == "rm");
  CHECK(Value<bool>(cmd, "--yes"));
  CHECK(Value<std::vector<std::string>>(cmd, "workspace") ==
        std::vector<std::string>{"dev", "other"});

  App app2;
  cmd = app2.Parse({"cp", "./src", "dev:/workspace/src"});
  CHECK(Value<std::string>(cmd, "source") == "./src");
  CHECK(Value<std::string>(cmd, "destination") == "dev:/workspace/src");

  App app3;
  cmd = app3.Parse({"keys", "create", "--tenant", "tn_1", "--scope", "admin"});
  CHECK(cmd->get_name() == "create");
  CHECK(cmd->get_parent()->get_name() == "keys");
  CHECK(Value<std::string>(cmd, "--scope") == "admin");

  App app4;
  CHECK_THROWS_AS(app4.Parse({"keys", "create", "--tenant", "t", "--scope", "root"}),
                  CLI::ParseError);
}

TEST_CASE("usage errors exit 2 with a berth: message") {
  FakeEnv env;
  App app;
  CHECK(app.Run({"frobnicate"}, env.Get()) == kExitUsage);
  CHECK(env.err.str().starts_with("berth: "));

  FakeEnv env2;
  App app2;
  CHECK(app2.Run({}, env2.Get()) == kExitUsage);

  // No URL anywhere: a usage error that says where a URL comes from.
  FakeEnv env3;
  App app3;
  CHECK(app3.Run({"ls"}, env3.Get()) == kExitUsage);
  CHECK(env3.err.str().find("BERTH_URL") != std::string::npos);

  FakeEnv env4;
  App app4;
  CHECK(app4.Run({"create", "x", "--idle-timeout", "soon", "--url", "http://127.0.0.1:1"},
                 env4.Get()) == kExitUsage);
  CHECK(env4.err.str().find("bad duration") != std::string::npos);
}

TEST_CASE("--help and --version exit 0") {
  FakeEnv env;
  App app;
  CHECK(app.Run({"--version"}, env.Get()) == 0);
  CHECK(env.out.str().find("berth ") != std::string::npos);
  FakeEnv env2;
  App app2;
  CHECK(app2.Run({"exec", "--help"}, env2.Get()) == 0);
  CHECK(env2.out.str().find("--no-stdin") != std::string::npos);
}

TEST_CASE("preview refuses a port out of range and a bad duration before calling berthd") {
  for (std::vector<std::string> args : {std::vector<std::string>{"preview", "dev", "0"},
                                        std::vector<std::string>{"preview", "dev", "65536"},
                                        std::vector<std::string>{"preview", "dev", "http"},
                                        std::vector<std::string>{"preview", "dev", "3000", "--expires", "soon"}}) {
    FakeEnv env;
    App app;
    INFO(args.back());
    CHECK(app.Run(args, env.Get()) == kExitUsage);
    CHECK_FALSE(env.err.str().empty());
  }
}

TEST_CASE("checkpoint WS --memory --name N") {
  App app;
  const CLI::App* cmd = app.Parse({"checkpoint", "dev", "--memory", "--name", "warm"});
  CHECK(cmd->get_name() == "checkpoint");
  CHECK(Value<std::string>(cmd, "workspace") == "dev");
  CHECK(Value<std::string>(cmd, "--name") == "warm");
  CHECK(Value<bool>(cmd, "--memory"));
  // Without it, a checkpoint of the disks only.
  App plain;
  CHECK_FALSE(Value<bool>(plain.Parse({"checkpoint", "dev"}), "--memory"));
  // Only `berth checkpoint` takes it: a restore brings memory back when its checkpoint has it.
  FakeEnv env;
  App bad;
  CHECK(bad.Run({"restore", "dev", "cp_1", "--memory"}, env.Get()) == kExitUsage);
}

TEST_CASE("checkpoint, checkpoints and restore refuse missing arguments before calling berthd") {
  for (std::vector<std::string> args : {std::vector<std::string>{"checkpoint"},
                                        std::vector<std::string>{"checkpoint", "dev", "--name"},
                                        std::vector<std::string>{"checkpoints"},
                                        std::vector<std::string>{"checkpoints", "dev", "--rm"},
                                        std::vector<std::string>{"restore", "dev"},
                                        std::vector<std::string>{"restore", "dev", "cp_1", "--undo"}}) {
    FakeEnv env;
    App app;
    INFO(args.size() << " " << args.back());
    CHECK(app.Run(args, env.Get()) == kExitUsage);
    CHECK(env.err.str().find("berth: ") != std::string::npos);
  }
  FakeEnv help;
  App app;
  CHECK(app.Run({"restore", "--help"}, help.Get()) == 0);
  CHECK(help.out.str().find("--no-undo") != std::string::npos);
}
