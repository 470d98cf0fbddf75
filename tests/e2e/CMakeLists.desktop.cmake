# The desktop of a real VM (issue 14) and the web UI on it (issue 15): one desktop-image guest
# under the real berthd, made in the web UI and shared by every check: the live list, the
# terminal across a reload, a file up and down, a dev server through the Previews tab, the
# screen at create, Playwright's connectOverCDP through berthd, the agent's click landing on
# the exact pixel, a view viewer's raw RFB dropped, a takeover's 423s and the person's click,
# the hand-back's tabs, request_human answered from noVNC in the web UI (its canvas compared
# with the screenshot API), a lease running out, a private takeover, the clipboard both ways,
# a cookie across stop and start (see the script's header). Needs web/dist (scripts/setup).
# Runs beside build-asan/'s compile.
find_program(BERTH_NODE_E2E node)
if(NOT BERTH_NODE_E2E)
  set(BERTH_NODE_E2E node)
endif()
add_test(NAME e2e_desktop COMMAND ${BERTH_NODE_E2E} ${PROJECT_SOURCE_DIR}/tests/e2e/desktop/desktop_vm_test.mjs)
set_tests_properties(e2e_desktop PROPERTIES
  ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>;BERTHD_BIN=$<TARGET_FILE:berthd>;BERTH_E2E_OUT=${CMAKE_BINARY_DIR}/e2e"
  TIMEOUT 2400
  SKIP_RETURN_CODE 77
  LABELS e2e
  RESOURCE_LOCK berth_images)
