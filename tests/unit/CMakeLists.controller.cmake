berth_add_test(unit_domain_xml NO_AGENT SOURCES unit/domain_xml_test.cc unit/save_image_test.cc
               LIBS berth_controller_core
               LABELS unit)
target_compile_definitions(unit_domain_xml PRIVATE BERTH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
berth_add_test(unit_sqlite NO_AGENT SOURCES unit/sqlite_test.cc LIBS berth_controller_core LABELS unit)
berth_add_test(unit_store NO_AGENT SOURCES unit/store_test.cc LIBS berth_controller_core LABELS unit)
berth_add_test(unit_random NO_AGENT SOURCES unit/random_test.cc LABELS unit)
target_link_libraries(unit_random PRIVATE berth_common)
berth_add_test(unit_workspace_service NO_AGENT
               SOURCES unit/workspace_service_test.cc unit/workspace_service_faults_test.cc
                       unit/workspace_service_crash_test.cc unit/workspace_checkpoints_test.cc
                       unit/workspace_forks_test.cc unit/workspace_diff_test.cc
               LIBS berth_controller_core LABELS unit)
berth_add_test(unit_change_feed NO_AGENT SOURCES unit/change_feed_test.cc LIBS berth_controller_core
               LABELS unit)
