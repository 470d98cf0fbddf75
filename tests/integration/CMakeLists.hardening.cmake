# Hostile input and keys (issue 12): bounded JSON, invalid UTF-8, a guest's tar on the host,
# the agent's signal race around fork, MCP's body limits and deadline, berthd's scopes.
berth_add_test(unit_json NO_AGENT SOURCES unit/json_test.cc LIBS berth_common LABELS unit)
# The agent in-process and stand-in peers (a hostile agent, a guest serving a tar, MCP alone).
berth_add_test(integration_hostile_input
               SOURCES integration/hostile_json_test.cc integration/tar_host_test.cc
                       integration/mcp_limits_test.cc integration/http_refusal_test.cc
               LIBS berth_mcp LABELS integration)
# The race needs the real binary: only its main() installs asio's SIGTERM handler.
berth_add_test(integration_agent_signals SOURCES integration/agent_signal_test.cc
               LABELS integration)
target_compile_definitions(integration_agent_signals PRIVATE
                           BERTH_AGENT_BIN="$<TARGET_FILE:berth-agent>")
add_dependencies(integration_agent_signals berth-agent)
# berthd in-process (one daemon shared by the files, tests/integration/berthd_hardening_util.h).
berth_add_test(integration_berthd_hardening
               SOURCES integration/berthd_scopes_test.cc integration/berthd_hostile_test.cc
                       integration/berthd_mcp_auth_test.cc integration/berthd_types_test.cc
                       integration/berthd_fds_test.cc integration/berthd_files_test.cc
               LIBS berth_test_berthd LABELS integration TIMEOUT 600)
set_tests_properties(integration_berthd_hardening PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_berthd_hardening berth-agent)
# Every JSON parse and dump in the product goes through common/json.h.
add_test(NAME lint_json_calls COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lint/json_calls
                                      ${PROJECT_SOURCE_DIR})
set_tests_properties(lint_json_calls PROPERTIES LABELS unit TIMEOUT 60)
