# The preview e2e test's node_modules cache (tests/support/npm_cache.py) against a fake npm: no
# registry, about 3 s.
add_test(NAME unit_npm_cache COMMAND ${PROJECT_SOURCE_DIR}/tests/unit/npm_cache_test.py)
set_tests_properties(unit_npm_cache PROPERTIES LABELS unit TIMEOUT 60)
