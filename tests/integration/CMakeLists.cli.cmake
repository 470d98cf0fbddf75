# The CLI: unit tests of its pure parts, and the real `berth` binary against a real berthd.
berth_add_test(unit_cli NO_AGENT
               SOURCES unit/cli_args_test.cc unit/cli_config_test.cc unit/cli_output_test.cc
                       unit/cli_paths_test.cc
               LIBS berth_cli_core LABELS unit)

# Runs `berth` as a child process (and in a pseudo-terminal for `berth shell`) against berthd
# started with --transport unix: a real berth-agent per workspace as a host process, no VM.
berth_add_test(integration_cli NO_AGENT SOURCES integration/cli_test.cc LIBS berth_common util
               LABELS integration TIMEOUT 600)
target_compile_definitions(integration_cli PRIVATE
                           BERTH_CLI_BIN="$<TARGET_FILE:berth>"
                           BERTH_AGENT_BIN="$<TARGET_FILE:berth-agent>")
add_dependencies(integration_cli berth berth-agent)
if(TARGET berthd)
  target_compile_definitions(integration_cli PRIVATE BERTHD_BIN="$<TARGET_FILE:berthd>")
  add_dependencies(integration_cli berthd)
endif()
