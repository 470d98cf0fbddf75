# MCP against a client that is not ours: the official TypeScript SDK (tests/mcp; scripts/setup
# runs `npm ci` there) drives `berth mcp` over stdio and berthd's /mcp over streamable HTTP,
# with berthd on --transport unix (a real berth-agent per workspace as a host process).
if(TARGET berth)
  set(mcp_stdio_bin berth)
  set(mcp_stdio_subcommand mcp)
else()
  # No CLI in this build: a test-only stdio server that calls the same RunStdio.
  add_executable(berth-mcp-stdio mcp/berth_mcp_stdio.cc)
  target_link_libraries(berth-mcp-stdio PRIVATE berth_mcp CLI11::CLI11)
  target_precompile_headers(berth-mcp-stdio REUSE_FROM berth_common)
  set(mcp_stdio_bin berth-mcp-stdio)
  set(mcp_stdio_subcommand "")
endif()

# /mcp alone in front of a berthd: the HTTP half of the SDK test runs through it while berthd
# does not mount /mcp itself (once berthd's sources call ServeMcpHttp, berthd's /mcp is required).
add_executable(berth-mcp-http-gateway mcp/berth_mcp_http_gateway.cc)
target_link_libraries(berth-mcp-http-gateway PRIVATE berth_mcp CLI11::CLI11)
target_precompile_headers(berth-mcp-http-gateway REUSE_FROM berth_common)

find_program(BERTH_NODE node)
if(BERTH_NODE AND TARGET berthd)
  add_test(NAME integration_mcp_sdk
           COMMAND ${BERTH_NODE} ${CMAKE_CURRENT_SOURCE_DIR}/mcp/mcp_test.mjs
                   --berthd=$<TARGET_FILE:berthd>
                   --agent=$<TARGET_FILE:berth-agent>
                   --stdio-bin=$<TARGET_FILE:${mcp_stdio_bin}>
                   --stdio-subcommand=${mcp_stdio_subcommand}
                   --http-gateway=$<TARGET_FILE:berth-mcp-http-gateway>)
  set_tests_properties(integration_mcp_sdk PROPERTIES TIMEOUT 300 LABELS integration)
else()
  message(STATUS "integration_mcp_sdk: not registered (needs node and the berthd target)")
endif()

# The HTTP transport in-process against a stand-in for berthd's API (no berthd needed).
berth_add_test(integration_mcp_http NO_AGENT SOURCES integration/mcp_http_test.cc LIBS berth_mcp
               LABELS integration)
