// The `berth` command line: global flags, every command group, dispatch, and the mapping of
// errors to messages and exit codes. main.cc is `return berth::cli::Main(argc, argv);`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/context.h"

namespace berth::cli {

class App {
 public:
  App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Parses `args` (without the program name) and returns the command given: the deepest
  // subcommand selected. Throws CLI::ParseError as CLI11 does; for tests and Run().
  const CLI::App* Parse(std::vector<std::string> args);
  // Parses and runs; returns the exit code. Messages go to env's streams.
  int Run(std::vector<std::string> args, Environment env);

  const GlobalOptions& globals() const { return globals_; }
  CLI::App& cli() { return app_; }

 private:
  CLI::App app_;
  GlobalOptions globals_;
  Registry registry_;
};

int Main(int argc, char** argv);

}  // namespace berth::cli
