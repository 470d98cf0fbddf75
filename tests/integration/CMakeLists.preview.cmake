# The browser half of the preview e2e test (issue 13) on the host: the stock Vite app with its
# cached node_modules (tests/support/npm_cache.py; registry.npmjs.org the first time only),
# tests/browser/preview_hmr.mjs on Debian's Chromium, positive and negative cases, a stand-in
# for berthd's preview front. About 40 s; no VM, no berthd.
add_test(NAME integration_preview_browser
         COMMAND ${PROJECT_SOURCE_DIR}/tests/integration/preview_browser_test.py)
set_tests_properties(integration_preview_browser PROPERTIES TIMEOUT 300 LABELS integration)

# tests/support/vite_preview.py against the real berthd API, berthd on --transport unix (a
# host berth-agent per workspace, no VM): upload, npm run dev, ports, HMR through the files
# API, stop. About 10 s.
add_test(NAME integration_vite_preview_api
         COMMAND ${PROJECT_SOURCE_DIR}/tests/integration/vite_preview_api_test.py)
set_tests_properties(integration_vite_preview_api PROPERTIES TIMEOUT 300 LABELS integration
  ENVIRONMENT "BERTHD_BIN=$<TARGET_FILE:berthd>;BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")

# berthd's preview proxy in-process (unix transport: host agents), an app on the host's
# loopback: access, what the app sees, streaming, WebSocket, hostile hosts, smuggling, wake.
berth_add_test(integration_berthd_preview SOURCES integration/berthd_preview_test.cc
               LIBS berth_test_berthd LABELS integration)
set_tests_properties(integration_berthd_preview PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_berthd_preview berth-agent)

# berthd's own TLS on the preview listener (common/http/tls_front.h): a wildcard certificate
# made at test time, https through to the app, WebSocket, the handshake deadline, the per-source
# cap by the client's own address, renewal without a restart, a bad pair refused at start, and
# `berth preview` (the CLI in-process) printing the https link.
berth_add_test(integration_berthd_preview_tls SOURCES integration/berthd_preview_tls_test.cc
               LIBS berth_test_berthd berth_cli_core LABELS integration)
set_tests_properties(integration_berthd_preview_tls PROPERTIES
                     ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>")
add_dependencies(integration_berthd_preview_tls berth-agent)

# http::TlsFront's contracts on their own (common/http/tls_front.h), before a plain http::Server:
# half-close, the write deadline, the handshake caps, Stop.
berth_add_test(integration_tls_front NO_AGENT SOURCES integration/tls_front_test.cc
               LIBS berth_common LABELS integration)
