# berthd's proxy to agents and the one byte pump (owner: proxy area).
berth_add_test(unit_proxy NO_AGENT
               SOURCES unit/upstream_request_test.cc unit/agent_target_test.cc unit/router_test.cc
               LIBS berth_controller_core LABELS unit)
berth_add_test(integration_net_pump NO_AGENT SOURCES integration/net_pump_test.cc
               LIBS berth_common LABELS integration)
berth_add_test(integration_agent_proxy NO_AGENT SOURCES integration/agent_proxy_test.cc
               LIBS berth_controller_core LABELS integration)
# berthd in-process with real agents (berth_test_berthd: CMakeLists.berthd.cmake).
berth_add_test(integration_berthd_proxy SOURCES integration/berthd_proxy_test.cc
               LIBS berth_test_berthd LABELS integration)
set_tests_properties(integration_berthd_proxy PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_berthd_proxy berth-agent)
