# The MCP server's pure parts: JSON-RPC, negotiation, tools/list, arguments, file_edit, the
# transports' helpers, and the tools against FakeBackend.
berth_add_test(unit_mcp NO_AGENT
               SOURCES unit/mcp_json_rpc_test.cc unit/mcp_session_test.cc
                       unit/mcp_file_edit_test.cc unit/mcp_transport_test.cc
                       unit/mcp_tools_test.cc
               LIBS berth_mcp LABELS unit)
