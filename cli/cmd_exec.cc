// Running commands in a workspace: exec (pipes, live output, stdin, the remote exit code) and
// shell (an interactive PTY that follows the local terminal's size).
#include <unistd.h>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/session.h"
#include "cli/terminal.h"

namespace berth::cli {
namespace {

struct ExecOptions {
  std::string workspace;
  std::vector<std::string> command;
  std::vector<std::string> env;
  std::string cwd;
  std::string user;
  std::string timeout;
  bool no_stdin = false;
  bool tty = false;
};

// One argument is a shell command line (`berth exec ws 'make && ls'`, run by /bin/sh -c);
// several are an argv, run as given without a shell.
protocol::Command CommandFromArgs(const std::vector<std::string>& args) {
  if (args.size() == 1) return args[0];
  return args;
}

Result<protocol::SessionStart> StartFromOptions(const ExecOptions& o, const Environment& env,
                                                bool pty) {
  protocol::SessionStart start;
  if (!o.command.empty()) start.cmd = CommandFromArgs(o.command);
  for (const auto& item : o.env) {
    auto kv = SplitKeyValue(item, "--env");
    if (!kv) return Fail(kv.error());
    start.env[kv->first] = kv->second;
  }
  if (!o.cwd.empty()) start.cwd = o.cwd;
  if (!o.user.empty()) start.user = o.user;
  if (pty) {
    start.pty = WindowSize(0).value_or(protocol::PtySize(80, 24));
    if (!start.env.contains("TERM")) {
      start.env["TERM"] = env.getenv("TERM").value_or("xterm-256color");
    }
  }
  return start;
}

// Runs a session against the workspace and returns the remote exit code.
Result<int> RunRemote(Context& ctx, const ExecOptions& o, bool pty) {
  auto start = StartFromOptions(o, ctx.env(), pty);
  if (!start) return Fail(start.error());
  SessionOptions session_options;
  session_options.forward_stdin = !o.no_stdin;
  session_options.pty = pty;
  if (!o.timeout.empty()) {
    auto seconds = ParseDuration(o.timeout);
    if (!seconds) return Fail(seconds.error());
    session_options.timeout = *seconds;
  }
  auto agent = ctx.Connect(o.workspace);
  if (!agent) return Fail(agent.error());
  auto session = OpenExecSession(agent->client, agent->scope, *start);
  if (!session) return Fail(session.error());
  std::unique_ptr<RawTerminal> raw;
  if (pty) {
    auto entered = RawTerminal::Enter(0);
    if (!entered) return Fail(entered.error());
    raw = std::move(*entered);
  }
  ctx.out().flush();
  auto status = RunSession(**session, session_options);
  if (raw) raw->Restore();
  if (!status) return Fail(status.error());
  return ExitCodeFor(*status);
}

void AddSessionFlags(CLI::App* cmd, ExecOptions& o) {
  // One value per flag: `-e A=1 ws -- cmd` must leave `ws` alone.
  cmd->add_option("-e,--env", o.env, "K=V environment for the command (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("-w,--cwd", o.cwd, "working directory (default: the user's home)");
  cmd->add_option("-u,--user", o.user, "run as this user (default: the workspace's default user)");
}

}  // namespace

void AddExecCommands(Builder& b) {
  auto e = std::make_shared<ExecOptions>();
  auto* exec = b.Add(
      "exec", "run a command in a workspace: live output, stdin passed, its exit code returned",
      [e](Context& ctx) {
        bool pty = e->tty && ctx.env().stdin_tty;
        return RunRemote(ctx, *e, pty);
      });
  exec->add_option("workspace", e->workspace, "workspace id or name")->required();
  exec->add_option("command", e->command,
                   "the command after --; one argument is run by /bin/sh -c")
      ->required();
  AddSessionFlags(exec, *e);
  exec->add_option("--timeout", e->timeout, "kill the command after this long (30s, 10m)");
  exec->add_flag("-n,--no-stdin", e->no_stdin, "do not pass stdin (the command reads EOF)");
  exec->add_flag("-t,--tty", e->tty, "run in a terminal (a PTY) when stdin is one");
  exec->footer("Example: berth exec my-ws -- make -C /workspace/app test");

  auto s = std::make_shared<ExecOptions>();
  auto* shell = b.Add("shell", "an interactive shell (a PTY) in a workspace", [s](Context& ctx) {
    // Without a local terminal (`echo ls | berth shell ws`) the shell reads a script on pipes.
    return RunRemote(ctx, *s, ctx.env().stdin_tty);
  });
  shell->add_option("workspace", s->workspace, "workspace id or name")->required();
  shell->add_option("command", s->command, "a command instead of the login shell (after --)");
  AddSessionFlags(shell, *s);
}

}  // namespace berth::cli
