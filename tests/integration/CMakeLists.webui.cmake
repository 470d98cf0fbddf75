# The web UI (web/, issue 15) in Debian's Chromium (playwright-core from tests/browser) against
# a real berthd on --transport unix that serves web/dist (scripts/setup builds it): sign in,
# create and watch a workspace reach running, a terminal that survives a reload, upload and
# download, the timeline, CSRF refused, signed out. Screenshots of every page at laptop and
# phone width go to Testing/webui-screenshots. About 40 s on a quiet machine.
find_program(BERTH_NODE node)
if(NOT BERTH_NODE)
  set(BERTH_NODE node)
endif()
add_test(NAME integration_webui
         COMMAND ${BERTH_NODE} webui.mjs --screenshots ${CMAKE_BINARY_DIR}/Testing/webui-screenshots
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/browser)
set_tests_properties(integration_webui PROPERTIES RUN_SERIAL TRUE TIMEOUT 600 LABELS integration
  ENVIRONMENT "BERTHD_BIN=$<TARGET_FILE:berthd>;BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")

# A web terminal survives a network blip: the browser reaches berthd through a TCP proxy in the
# test that resets every connection mid-session and refuses new ones for 3 s; the terminal
# reattaches to the same PTY, shows its earlier output once with no stray escape codes, and
# still echoes. About 30 s.
add_test(NAME integration_webui_terminal_blip
         COMMAND ${BERTH_NODE} terminal_blip.mjs --screenshots ${CMAKE_BINARY_DIR}/Testing/webui-screenshots
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/browser)
set_tests_properties(integration_webui_terminal_blip PROPERTIES RUN_SERIAL TRUE TIMEOUT 300 LABELS integration
  ENVIRONMENT "BERTHD_BIN=$<TARGET_FILE:berthd>;BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")

# The desktop (issues 14 and 15): the Desktop tab and a shared link's desktop.html, noVNC on
# berthd's RFB bridge to a real RFB server (QEMU with no guest, -vnc on the workspace's
# run/vnc.sock): the screen shown at its size, take over (berthd says a person holds it, and a
# click and a key reach QEMU), hand back with a note, a private takeover, a view link refused
# control, a control link's takeover through its ticket, the agent's help request as a banner,
# a workspace with no screen and a stopped one. Screenshots desktop-*.png. About 60 s.
add_test(NAME integration_webui_desktop
         COMMAND ${BERTH_NODE} desktop.mjs --screenshots ${CMAKE_BINARY_DIR}/Testing/webui-screenshots
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/browser)
set_tests_properties(integration_webui_desktop PROPERTIES RUN_SERIAL TRUE TIMEOUT 300 LABELS integration
  ENVIRONMENT "BERTHD_BIN=$<TARGET_FILE:berthd>;BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")

# The Checkpoints tab and templates (web/src/checkpoints.tsx, templates.tsx, create.tsx): memory
# offered only while running or hibernated; a checkpoint taken appears in the list; a restore asks
# first, says the state it leaves is checkpointed and names berthd's undo checkpoint (and sends
# undo: false when it is turned off); a fork of N makes N workspaces and lists them (one goes to
# it); a delete that forks stand on shows berthd's 409 naming them; templates listed, offered in
# the create dialog and deleted; a template built from a script (against berthd: the 202, the
# building row turning failed with its log without a reload, no polling once none builds).
# libvirt's test driver takes no memory checkpoint, so a ready template is stood in for by the
# page's routes. Screenshots cp-*.png. About 25 s.
add_test(NAME integration_webui_checkpoints
         COMMAND ${BERTH_NODE} checkpoints.mjs --screenshots ${CMAKE_BINARY_DIR}/Testing/webui-screenshots
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/browser)
set_tests_properties(integration_webui_checkpoints PROPERTIES RUN_SERIAL TRUE TIMEOUT 300 LABELS integration
  ENVIRONMENT "BERTHD_BIN=$<TARGET_FILE:berthd>;BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
