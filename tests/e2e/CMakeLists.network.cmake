# End-to-end: guest network isolation with real VMs (see the script's header). Boots two TCG
# guests under a berthd with isolation on.
add_test(NAME e2e_network_isolation COMMAND ${PROJECT_SOURCE_DIR}/tests/e2e/network/network_isolation_vm_test.py)
set_tests_properties(e2e_network_isolation PROPERTIES
  ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>;BERTHD_BIN=$<TARGET_FILE:berthd>"
  TIMEOUT 3600
  SKIP_RETURN_CODE 77
  LABELS e2e
  RESOURCE_LOCK berth_images)
