# Per-tenant quotas and the host-disk floor (issue 12): berthd in-process on the unix
# transport, its own daemons (one shared by the limit tests, one each for the operator API's
# restart and the disk floor's fake free space). About 10 s.
berth_add_test(integration_berthd_quotas SOURCES integration/berthd_quota_test.cc
               LIBS berth_test_berthd LABELS integration TIMEOUT 300)
set_tests_properties(integration_berthd_quotas PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_berthd_quotas berth-agent)
