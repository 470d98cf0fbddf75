// berth: the command-line client of berthd. Everything lives in berth_cli_core.
#include "cli/app.h"

int main(int argc, char** argv) { return berth::cli::Main(argc, argv); }
