# The desktop's pure parts (controller/desktop/): the viewer-side RFB parser, tickets and
# control leases on a fake clock, the agent's actions as RFB input, screenshots' scaling and
# encoding (libpng decodes the PNGs berthd writes by hand), the clipboard tool's contract.
berth_add_test(unit_desktop NO_AGENT
               SOURCES unit/desktop_rfb_test.cc unit/desktop_control_test.cc unit/desktop_input_test.cc
                       unit/desktop_cdp_test.cc unit/desktop_clipboard_test.cc
               LIBS berth_controller_core PNG::PNG LABELS unit)
