berth_add_test(unit_domain_xml SOURCES unit/domain_xml_test.cc LIBS berth_controller_core
               LABELS unit)
target_compile_definitions(unit_domain_xml PRIVATE BERTH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
berth_add_test(unit_sqlite SOURCES unit/sqlite_test.cc LIBS berth_controller_core LABELS unit)
