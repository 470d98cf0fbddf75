# Fuzzing the agent's request handling (owner: ports area). Included from tests/CMakeLists.txt.
#
# Always: the corpus replay driver, run by CTest as `fuzz_request_corpus` (label fuzz). With
# -DBERTH_FUZZ_SANITIZE=ON the replay driver and the target are built with ASan+UBSan (the
# rest of the tree is not: add the flags to CMAKE_CXX_FLAGS for a fully sanitized run).
# With -DBERTH_FUZZ=ON and clang: the libFuzzer binary `request_fuzzer`; see tests/fuzz/README.md.
option(BERTH_FUZZ_SANITIZE "Build the fuzz replay driver with ASan and UBSan" OFF)

set(berth_fuzz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

add_executable(fuzz_request_replay fuzz/request_fuzz.cc fuzz/replay_main.cc)
target_link_libraries(fuzz_request_replay PRIVATE berth_agent_core)
target_precompile_headers(fuzz_request_replay REUSE_FROM berth_common)
if(BERTH_FUZZ_SANITIZE)
  target_compile_options(fuzz_request_replay PRIVATE -fsanitize=address,undefined
                         -fno-omit-frame-pointer)
  target_link_options(fuzz_request_replay PRIVATE -fsanitize=address,undefined)
endif()
add_test(NAME fuzz_request_corpus COMMAND fuzz_request_replay ${berth_fuzz_dir}/corpus)
set_tests_properties(fuzz_request_corpus PROPERTIES TIMEOUT 300 LABELS fuzz)

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
  add_executable(request_fuzzer fuzz/request_fuzz.cc)
  target_link_libraries(request_fuzzer PRIVATE berth_agent_core)
  target_compile_options(request_fuzzer PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(request_fuzzer PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
