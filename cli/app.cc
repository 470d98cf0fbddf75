#include "cli/app.h"

#include <csignal>
#include <iostream>

#include "cli/exit_codes.h"

namespace berth::cli {

App::App() : app_("berth: workspaces for AI agents (a Linux VM each), from the command line") {
  app_.name("berth");
  app_.set_version_flag("--version", "berth " BERTH_VERSION);
  app_.require_subcommand(1);
  // Global options may also follow the command: `berth ls --url U`.
  app_.fallthrough();
  app_.add_option("--url", globals_.url,
                  "berthd's URL (default: $BERTH_URL, then the config file)");
  app_.add_option("--api-key", globals_.api_key,
                  "API key (default: $BERTH_API_KEY, then the config file)");
  app_.add_option("--config", globals_.config_path,
                  "config file (default: $BERTH_CONFIG or ~/.config/berth/config.json)");
  app_.add_flag("-q,--quiet", globals_.quiet, "no progress bars or notes on stderr");
  app_.footer(
      "Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 auth, 5 unreachable, 6 conflict, "
      "7 timeout; exec and shell exit with the remote command's status.");
  Builder builder{app_, registry_, globals_};
  AddLoginCommands(builder);
  AddWorkspaceCommands(builder);
  AddExecCommands(builder);
  AddFileCommands(builder);
  AddPortCommands(builder);
  AddPreviewCommands(builder);
  AddCheckpointCommands(builder);
  AddForkCommands(builder);
  AddEventCommands(builder);
  AddAdminCommands(builder);
  AddNetworkCommands(builder);
  AddDesktopCommands(builder);
  AddMcpCommand(builder);
}

const CLI::App* App::Parse(std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app_.parse(args);
  const CLI::App* command = &app_;
  for (;;) {
    auto subs = command->get_subcommands();
    if (subs.empty()) return command;
    command = subs.front();
  }
}

int App::Run(std::vector<std::string> args, Environment env) {
  const CLI::App* command = nullptr;
  try {
    command = Parse(std::move(args));
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app_.exit(e, *env.out, *env.err);  // --help, --version
    *env.err << "berth: " << e.what() << "\n"
             << "Run 'berth --help' or 'berth COMMAND --help' for usage.\n";
    return kExitUsage;
  }
  const Action* action = registry_.Find(command);
  if (action == nullptr) {
    *env.err << command->help();
    return kExitUsage;
  }
  Context context(globals_, std::move(env));
  Result<int> result = Fail(ErrorCode::kInternal, "not run");
  try {
    result = (*action)(context);
  } catch (const std::exception& e) {
    // Exceptions from libraries are caught here, at the edge.
    result = Fail(ErrorCode::kInternal, e.what());
  }
  context.out().flush();
  if (!result) {
    Error error = context.Explain(result.error());
    context.err() << "berth: " << error.message << std::endl;
    return ExitCodeFor(error.code);
  }
  return *result;
}

int Main(int argc, char** argv) {
  // A closed pipe (`berth ls | head -1`) is an error on write, not a silent death.
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  App app;
  return app.Run(std::move(args), Environment::FromProcess());
}

}  // namespace berth::cli
