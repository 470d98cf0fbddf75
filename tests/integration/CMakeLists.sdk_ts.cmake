# The TypeScript SDK (sdk/typescript, issue 16; scripts/setup runs `npm ci` there): `npm test`
# builds it with tsc and runs its node:test files against a real berthd on --transport unix (a
# real berth-agent per workspace as a host process, no VM): every method, errors, 1 GiB up and
# down with a flat RSS, E2B's quick-start ported, and the desktop's screenshots and actions
# against a real RFB server (test/desktop.test.mjs: qemu-system-x86_64 -S with a VGA screen on
# the workspace's VNC socket, as desktop_support.cc runs it). The 1 GiB transfers take most of its time
# (see the test's output); the ASan berthd of build-asan/ is slower, hence the timeout.
find_program(BERTH_NPM npm)
if(NOT BERTH_NPM)
  set(BERTH_NPM npm)
endif()
add_test(NAME integration_sdk_ts COMMAND ${BERTH_NPM} test --silent
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/typescript)
# RESOURCE_LOCK: see integration_sdk_python (port 3000 and /home/user on this host).
set_tests_properties(integration_sdk_ts PROPERTIES RUN_SERIAL TRUE TIMEOUT 900 LABELS integration
  RESOURCE_LOCK berth_sdk_e2b_quickstart
  ENVIRONMENT "BERTHD_BIN=$<TARGET_FILE:berthd>;BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")

# tsc --noEmit --strict over the SDK's sources: no build of Berth needed.
add_test(NAME lint_sdk_ts COMMAND ${BERTH_NPM} run --silent lint
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/typescript)
set_tests_properties(lint_sdk_ts PROPERTIES TIMEOUT 300 LABELS lint)
