# Files: streaming up/download, listing, stat, mkdir/move/remove, tar both ways, watch.
berth_add_test(unit_files SOURCES unit/files_protocol_test.cc LABELS unit)
berth_add_test(integration_files
               SOURCES integration/files_basic_test.cc integration/files_tar_test.cc
                       integration/files_watch_test.cc
               LABELS integration)
# 1 GiB each way through the real binary, whose peak RSS is read from /proc.
berth_add_test(integration_files_large SOURCES integration/files_large_test.cc
               LABELS integration TIMEOUT 900)
target_compile_definitions(integration_files_large PRIVATE
                           BERTH_AGENT_BIN="$<TARGET_FILE:berth-agent>")
add_dependencies(integration_files_large berth-agent)
