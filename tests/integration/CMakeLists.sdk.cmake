# The Python SDK (sdk/python, issue 16) against the real berthd on --transport unix (a host
# berth-agent per workspace, no VM): every method of Workspace and AsyncWorkspace, errors by
# type, Retry-After and deadlines (stand-in servers), a stream cut by a stop, 1 GiB up and down
# (sync and async clients) with the client's peak RSS flat, E2B's quick start ported, and the
# desktop's screenshots and actions against a real RFB server (qemu-system-x86_64 -S with a VGA
# screen on the workspace's VNC socket, as desktop_support.cc runs it; scripts/setup installs
# it), LockedError during a takeover, and actions refused locally with berthd's limits. On
# Debian's interpreter and packages (python3-httpx, python3-pytest: scripts/setup). The 1 GiB
# transfers take most of its time (see the test's output); the ASan berthd is slower.
add_test(NAME integration_sdk_python
         COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider tests
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/python)
# RESOURCE_LOCK: both SDKs' E2B quick-start ports serve on this host's port 3000 and write
# /home/user/my-file (their "guest" is this host), so the two tests never run at once.
set_tests_properties(integration_sdk_python PROPERTIES RUN_SERIAL TRUE TIMEOUT 1200 LABELS integration
  RESOURCE_LOCK berth_sdk_e2b_quickstart
  ENVIRONMENT "BERTHD_BIN=$<TARGET_FILE:berthd>;BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>;PYTHONDONTWRITEBYTECODE=1")

# mypy --strict on the package (Debian's mypy; no cache left in the tree).
add_test(NAME lint_sdk_python_mypy
         COMMAND mypy --strict --cache-dir=/dev/null berth
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/python/src)
set_tests_properties(lint_sdk_python_mypy PROPERTIES TIMEOUT 300 LABELS lint)
