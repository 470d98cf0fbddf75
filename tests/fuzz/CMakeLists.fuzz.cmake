# Fuzzing: the agent's request handling (request_fuzz.cc, owner: ports area), berthd's own
# (berthd_fuzz.cc) and the MCP server's JSON-RPC (mcp_fuzz.cc). Included from
# tests/CMakeLists.txt.
#
# Always: a corpus replay driver per target, run by CTest as `fuzz_request_corpus`,
# `fuzz_berthd_corpus` and `fuzz_mcp_corpus` (label fuzz). With -DBERTH_FUZZ_SANITIZE=ON the
# replay drivers and the targets are built with ASan+UBSan (the rest of the tree is not: add
# the flags to CMAKE_CXX_FLAGS for a fully sanitized run). With -DBERTH_FUZZ=ON and clang: the
# libFuzzer binaries `request_fuzzer`, `berthd_fuzzer`, `mcp_fuzzer`; see tests/fuzz/README.md.
option(BERTH_FUZZ_SANITIZE "Build the fuzz replay driver with ASan and UBSan" OFF)

set(berth_fuzz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

if(BERTH_FUZZ)
  # clang 14 cannot compile libstdc++ 12's <expected> (it needs P0848, conditionally trivial
  # special members, which clang implements from 16 on); libstdc++ also gates <expected> on
  # __cpp_concepts >= 202002L, which clang 16 does not announce yet, hence the define below.
  # Coverage must come from every translation unit, not only the target: fuzzer-no-link goes
  # into CMAKE_CXX_FLAGS. See tests/fuzz/README.md for the full command.
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR CMAKE_CXX_COMPILER_VERSION VERSION_LESS 16)
    message(FATAL_ERROR "BERTH_FUZZ=ON needs clang >= 16 (CXX=clang++-16); with g++ use "
                        "-DBERTH_FUZZ_SANITIZE=ON and the corpus replay instead")
  endif()
  if(NOT CMAKE_CXX_FLAGS MATCHES "fuzzer-no-link" OR NOT CMAKE_CXX_FLAGS MATCHES "__cpp_concepts")
    message(FATAL_ERROR "BERTH_FUZZ=ON: configure with -DCMAKE_CXX_FLAGS=\"-D__cpp_concepts=202002L "
                        "-Wno-macro-redefined -fsanitize=fuzzer-no-link,address,undefined\" "
                        "-DBERTH_WERROR=OFF (see tests/fuzz/README.md)")
  endif()
endif()

# berth_fuzz_target(NAME SOURCE CORPUS LIBS...): NAME_replay (CTest fuzz_NAME_corpus on
# tests/fuzz/CORPUS) and, with BERTH_FUZZ, the libFuzzer binary NAME_fuzzer.
function(berth_fuzz_target name source corpus)
  add_executable(fuzz_${name}_replay fuzz/${source} fuzz/replay_main.cc)
  target_link_libraries(fuzz_${name}_replay PRIVATE ${ARGN})
  target_precompile_headers(fuzz_${name}_replay REUSE_FROM berth_common)
  if(BERTH_FUZZ_SANITIZE)
    target_compile_options(fuzz_${name}_replay PRIVATE -fsanitize=address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_${name}_replay PRIVATE -fsanitize=address,undefined)
  endif()
  add_test(NAME fuzz_${name}_corpus COMMAND fuzz_${name}_replay ${berth_fuzz_dir}/${corpus})
  set_tests_properties(fuzz_${name}_corpus PROPERTIES TIMEOUT 300 LABELS fuzz)
  if(BERTH_FUZZ)
    add_executable(${name}_fuzzer fuzz/${source})
    target_link_libraries(${name}_fuzzer PRIVATE ${ARGN})
    target_compile_options(${name}_fuzzer PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${name}_fuzzer PRIVATE -fsanitize=fuzzer,address,undefined)
  endif()
endfunction()

berth_fuzz_target(request request_fuzz.cc corpus berth_agent_core)
berth_fuzz_target(berthd berthd_fuzz.cc corpus-berthd berth_controller_core)
berth_fuzz_target(mcp mcp_fuzz.cc corpus-mcp berth_mcp)
# The desktop's viewer-side RFB parser (controller/desktop/rfb_parser.h).
berth_fuzz_target(rfb rfb_fuzz.cc corpus-rfb berth_controller_core)
