# The randomized crash suite (see run-crash-suite's header): berthd SIGKILLed at random points
# of its operations and restarted on the same port and data directory, the invariants checked
# after every restart. Real QEMU domains under qemu:///system whose guest is a halting stub
# (no boot), agents as host processes: ~4.5 s a kill with checkpoints in the mix (40 kills in
# 180 s measured; the budget leaves room for a slower host). Forks in the mix (up to 2 more
# workspaces) cost ~5 %: 40 kills in 108-136 s without them, 120-130 s with them, the same
# quiet 2-core host (2026-12-04). CI runs a short count; BENCHMARKS.md records a 1,000-kill run.
add_test(NAME crash_suite COMMAND ${CMAKE_CURRENT_LIST_DIR}/run-crash-suite 40 --budget-s 240)
set_tests_properties(crash_suite PROPERTIES
  ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>;BERTHD_BIN=$<TARGET_FILE:berthd>"
  TIMEOUT 300
  SKIP_RETURN_CODE 77
  LABELS integration)
