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
