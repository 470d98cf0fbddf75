# End-to-end: the real berthd drives real VMs from the base image (see the script's header).
add_test(NAME e2e_berthd_vms COMMAND ${PROJECT_SOURCE_DIR}/tests/e2e/berthd/berthd_vm_test.py)
set_tests_properties(e2e_berthd_vms PROPERTIES
  ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>;BERTHD_BIN=$<TARGET_FILE:berthd>"
  TIMEOUT 3600
  SKIP_RETURN_CODE 77
  LABELS e2e
  RESOURCE_LOCK berth_images)

# Previews of a real VM (issue 13): stock Vite on the guest's loopback in headless Chromium
# through berthd's preview proxy, HMR included; credentials, refusals and wake on request.
add_test(NAME e2e_preview COMMAND ${PROJECT_SOURCE_DIR}/tests/e2e/preview/preview_vm_test.py)
set_tests_properties(e2e_preview PROPERTIES
  ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>;BERTHD_BIN=$<TARGET_FILE:berthd>"
  TIMEOUT 3600
  SKIP_RETURN_CODE 77
  LABELS e2e
  RESOURCE_LOCK berth_images)
