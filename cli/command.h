// How command groups plug into the `berth` app: each cmd_*.cc adds its subcommands to the
// CLI11 app and registers what runs when one of them is the command given.
#pragma once

#include <functional>
#include <map>

#include <CLI/CLI.hpp>

#include "cli/context.h"
#include "common/error.h"

namespace berth::cli {

// Runs a command; the exit code on success (0, or a remote command's status), an Error
// otherwise (printed as "berth: <message>", exit code from exit_codes.h).
using Action = std::function<Result<int>(Context&)>;

class Registry {
 public:
  void Add(const CLI::App* command, Action action) { actions_[command] = std::move(action); }
  const Action* Find(const CLI::App* command) const {
    auto it = actions_.find(command);
    return it == actions_.end() ? nullptr : &it->second;
  }

 private:
  std::map<const CLI::App*, Action> actions_;
};

// What a command group needs to add its commands.
struct Builder {
  CLI::App& app;
  Registry& registry;
  GlobalOptions& globals;

  // A subcommand of `parent` (the top level when null) whose action is `action`.
  CLI::App* Add(const std::string& name, const std::string& description, Action action,
                CLI::App* parent = nullptr) {
    CLI::App* sub = (parent ? *parent : app).add_subcommand(name, description);
    registry.Add(sub, std::move(action));
    return sub;
  }
  // A group such as `keys` whose subcommands do the work.
  CLI::App* Group(const std::string& name, const std::string& description) {
    CLI::App* sub = app.add_subcommand(name, description);
    sub->require_subcommand(1);
    return sub;
  }
  // --json on a listing or get command.
  void AddJsonFlag(CLI::App* sub) {
    sub->add_flag("--json", globals.json, "print JSON (the server's objects) for scripts");
  }
};

// One per file (cmd_*.cc).
void AddLoginCommands(Builder& b);      // login, logout, whoami
void AddWorkspaceCommands(Builder& b);  // create, ls, get, start, stop, hibernate, restart, rm
void AddExecCommands(Builder& b);       // exec, shell
void AddFileCommands(Builder& b);       // cp
void AddPortCommands(Builder& b);       // ports, port-forward
void AddPreviewCommands(Builder& b);    // preview, previews
void AddCheckpointCommands(Builder& b); // checkpoint, checkpoints, restore
void AddForkCommands(Builder& b);       // fork, template create|ls|rm
void AddEventCommands(Builder& b);      // events (logs), usage
void AddAdminCommands(Builder& b);      // keys, tenants
void AddMcpCommand(Builder& b);         // mcp
void AddNetworkCommands(Builder& b);    // network
void AddDesktopCommands(Builder& b);    // desktop screenshot|act|control

}  // namespace berth::cli
