# berthd in-process on libvirt's test driver, with real agents as host processes.
add_library(berth_test_berthd STATIC ${CMAKE_CURRENT_LIST_DIR}/../support/test_berthd.cc)
target_link_libraries(berth_test_berthd PUBLIC berth_controller_core berth_test_support)
target_precompile_headers(berth_test_berthd REUSE_FROM berth_common)

berth_add_test(integration_berthd_api SOURCES integration/berthd_api_test.cc
                                                integration/berthd_routes_test.cc
                                                integration/berthd_timeline_test.cc
                                                integration/berthd_checkpoints_test.cc
               LIBS berth_test_berthd LABELS integration TIMEOUT 600)
set_tests_properties(integration_berthd_api PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_berthd_api berth-agent)
berth_add_test(integration_agent_probe NO_AGENT SOURCES integration/agent_probe_test.cc
               LIBS berth_controller_core LABELS integration)

# The web UI's side of berthd: sign-in sessions (cookie, CSRF, Origin, expiry, revocation), the
# live workspace list (server-sent events) and the UI's files under "/".
berth_add_test(integration_berthd_sessions SOURCES integration/berthd_sessions_test.cc
               LIBS berth_test_berthd LABELS integration TIMEOUT 600)
set_tests_properties(integration_berthd_sessions PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_berthd_sessions berth-agent)
