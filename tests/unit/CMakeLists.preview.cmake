# The preview e2e test's node_modules cache (tests/support/npm_cache.py) against a fake npm: no
# registry, about 3 s.
add_test(NAME unit_npm_cache COMMAND ${PROJECT_SOURCE_DIR}/tests/unit/npm_cache_test.py)
set_tests_properties(unit_npm_cache PROPERTIES LABELS unit TIMEOUT 60)

# The preview proxy's pure parts: hosts, config, what the app and the browser see.
berth_add_test(unit_preview NO_AGENT
               SOURCES unit/preview_host_test.cc unit/preview_request_test.cc
               LIBS berth_controller_core LABELS unit)
