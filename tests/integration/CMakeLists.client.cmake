# The typed client of berthd's API (common/client/berth_client.h) against an in-process berthd
# and against a stand-in server for retries, deadlines and malformed answers.
berth_add_test(integration_berth_client SOURCES integration/berth_client_test.cc
               LIBS berth_test_berthd LABELS integration TIMEOUT 300)
set_tests_properties(integration_berth_client PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_berth_client berth-agent)
