# Connection caps and header deadlines (issue 12, "Floods and stalls"): berthd in-process on
# real loopback sockets (about 10 s: one test waits out a 3 s idle on purpose).
berth_add_test(integration_conn_caps SOURCES integration/conn_caps_test.cc
               LIBS berth_test_berthd LABELS integration TIMEOUT 300)
set_tests_properties(integration_conn_caps PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_conn_caps berth-agent)
