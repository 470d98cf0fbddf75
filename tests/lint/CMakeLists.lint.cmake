# Source checks: no build needed, run with the unit tests.
# co_await under ?:, && or || (the g++ 12 double destruction, docs/architecture.md).
add_test(NAME unit_co_await_lint
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/co_await_check.py ${PROJECT_SOURCE_DIR})
set_tests_properties(unit_co_await_lint PROPERTIES LABELS unit TIMEOUT 60)
# A Catch2 case that WARNs and returns passes without running: skips go through BERTH_SKIP.
add_test(NAME unit_skip_lint COMMAND ${CMAKE_CURRENT_LIST_DIR}/skip_check.py ${PROJECT_SOURCE_DIR})
set_tests_properties(unit_skip_lint PROPERTIES LABELS unit TIMEOUT 60)
