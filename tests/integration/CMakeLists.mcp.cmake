# MCP against a client that is not ours: the official TypeScript SDK (tests/mcp; scripts/setup
# runs `npm ci` there) drives `berth mcp` over stdio and berthd's /mcp over streamable HTTP,
# with berthd on --transport unix (a real berth-agent per workspace as a host process).
# scripts/setup installs Node: without it the test fails rather than quietly not running.
find_program(BERTH_NODE node)
if(NOT BERTH_NODE)
  set(BERTH_NODE node)
endif()
add_test(NAME integration_mcp_sdk
           COMMAND ${BERTH_NODE} ${CMAKE_CURRENT_SOURCE_DIR}/mcp/mcp_test.mjs
                 --berthd=$<TARGET_FILE:berthd>
                 --agent=$<TARGET_FILE:berth-agent>
                 --stdio-bin=$<TARGET_FILE:berth>
                 --stdio-subcommand=mcp)
set_tests_properties(integration_mcp_sdk PROPERTIES TIMEOUT 300 LABELS integration)

# The HTTP transport in-process against a stand-in for berthd's API (no berthd needed).
berth_add_test(integration_mcp_http NO_AGENT SOURCES integration/mcp_http_test.cc LIBS berth_mcp
               LABELS integration)
