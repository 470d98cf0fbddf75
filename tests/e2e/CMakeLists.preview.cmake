# End-to-end: preview links to a real VM (see the script's header): Vite HMR in Chromium
# through the preview proxy, what a guest server sees, refusals, wake. One TCG guest.
add_test(NAME e2e_preview COMMAND ${PROJECT_SOURCE_DIR}/tests/e2e/preview/preview_vm_test.py)
set_tests_properties(e2e_preview PROPERTIES
  ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>;BERTHD_BIN=$<TARGET_FILE:berthd>"
  TIMEOUT 3600
  SKIP_RETURN_CODE 77
  LABELS e2e
  RESOURCE_LOCK berth_images)
