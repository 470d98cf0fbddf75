# berthd's desktop bridge in-process (unix transport: host agents), its VNC sockets pointed at
# a real QEMU without a guest (handshake, framebuffer updates) and at a recording fake RFB
# server (what reaches the server): tickets, origins, tenants, control, input filtering.
# QEMU is installed by scripts/setup; without it the test fails (it is never skipped).
berth_add_test(integration_berthd_desktop
               SOURCES integration/berthd_desktop_test.cc integration/desktop_support.cc
               LIBS berth_test_berthd LABELS integration)
set_tests_properties(integration_berthd_desktop PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_berthd_desktop berth-agent)

# The DevTools tunnel (…/desktop/cdp) with Playwright's connectOverCDP against a real Chromium
# on this host's loopback (the agent runs on the host under --transport unix): reads pass and
# clicks are refused while a person holds control; a private takeover closes it. About 20 s.
find_program(BERTH_NODE node)
if(NOT BERTH_NODE)
  set(BERTH_NODE node)
endif()
add_test(NAME integration_desktop_cdp
         COMMAND ${BERTH_NODE} cdp.mjs
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/browser)
set_tests_properties(integration_desktop_cdp PROPERTIES TIMEOUT 300 LABELS integration
  ENVIRONMENT "BERTHD_BIN=$<TARGET_FILE:berthd>;BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
