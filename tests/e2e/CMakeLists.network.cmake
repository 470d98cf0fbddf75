# End-to-end: guest network isolation with real VMs (see the script's header). It needs berthd
# wired to NetworkManager (the "network" config key, the service's calls), so it is off until
# that lands: configure with -DBERTH_E2E_NETWORK=ON, and make it the default then. Boots two TCG
# guests: run it when the machine is free.
option(BERTH_E2E_NETWORK "Register the guest network isolation e2e test" OFF)
if(BERTH_E2E_NETWORK)
  add_test(NAME e2e_network_isolation COMMAND ${PROJECT_SOURCE_DIR}/tests/e2e/network/network_isolation_vm_test.py)
  set_tests_properties(e2e_network_isolation PROPERTIES
    ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>;BERTHD_BIN=$<TARGET_FILE:berthd>"
    TIMEOUT 3600
    SKIP_RETURN_CODE 77
    LABELS e2e
    RESOURCE_LOCK berth_images)
endif()
