# CI's fuzz runs (included by tests/CMakeLists.txt): the harnesses built by clang against this
# build's libkiln as a sub-project (tests/fuzz/CMakeLists.txt), and one ctest test per harness
# that runs it for KILN_FUZZ_CI_SECONDS on its seed corpus. Without clang and its libFuzzer
# runtime the tests are skipped and say why.
set(KILN_FUZZ_CI_SECONDS 30 CACHE STRING "seconds each fuzz target runs under ctest")
set(KILN_FUZZ_HARNESSES onnx_import ms_read om_read converter_config keep_dtype aipp_config
    shape_spec roundtrip npy_read calibration_image)
set(fuzz_ci_dir ${CMAKE_BINARY_DIR}/fuzz-ci)
set(fuzz_ci_skip "")
find_program(KILN_FUZZ_CLANGXX NAMES clang++-14 clang++)
if(NOT KILN_FUZZ_CLANGXX)
  set(fuzz_ci_skip "clang++ not found (scripts/install-deps.sh fuzz installs clang)")
else()
  # clang without its runtime libraries (libclang-rt-14-dev) compiles but cannot link fuzzers.
  set(probe ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe.cpp)
  file(WRITE ${probe} "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
  execute_process(COMMAND ${KILN_FUZZ_CLANGXX} -fsanitize=fuzzer,address ${probe}
                          -o ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe
                  RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT probe_rc EQUAL 0)
    set(fuzz_ci_skip "${KILN_FUZZ_CLANGXX} cannot link -fsanitize=fuzzer programs (scripts/install-deps.sh fuzz installs libclang-rt-14-dev)")
  endif()
endif()

if(fuzz_ci_skip STREQUAL "")
  include(ExternalProject)
  ExternalProject_Add(kiln_fuzz_ci
    SOURCE_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz
    BINARY_DIR ${fuzz_ci_dir}
    CMAKE_ARGS -DCMAKE_CXX_COMPILER=${KILN_FUZZ_CLANGXX} -DCMAKE_BUILD_TYPE=Release
               -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
               -DKILN_LIBRARY=$<TARGET_FILE:kiln> -DKILN_SOURCE_DIR=${PROJECT_SOURCE_DIR}
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON
    DEPENDS kiln)
else()
  message(STATUS "kiln: fuzz tests will be skipped: ${fuzz_ci_skip}")
endif()

foreach(name IN LISTS KILN_FUZZ_HARNESSES)
  add_test(NAME fuzz_${name}
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/fuzz/run_one.sh ${fuzz_ci_dir}/${name}_fuzz
            ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${name} ${CMAKE_BINARY_DIR}/fuzz-work/${name}
            ${KILN_FUZZ_CI_SECONDS} "${fuzz_ci_skip}")
  set_tests_properties(fuzz_${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS fuzz)
endforeach()
# The slow targets. om_read and roundtrip (~330 and ~420 inputs/s on a quiet CI machine) ran into
# the time limit before the 20,000-run cap: a quiet machine ran ~10,000 and ~13,000 inputs in their
# 30 s, a loaded one a few thousand, so their mutation sequence, which the fixed seed and run cap
# are there to make repeatable (run_one.sh), changed from run to run. They get a run cap each that a
# quiet machine reaches in ~15 s: the same inputs every run, with the time limit a ceiling only.
set_tests_properties(fuzz_ms_read PROPERTIES COST 14)
set_tests_properties(fuzz_om_read PROPERTIES COST 15 ENVIRONMENT KILN_FUZZ_RUNS=5000)
set_tests_properties(fuzz_roundtrip PROPERTIES COST 15 ENVIRONMENT KILN_FUZZ_RUNS=6000)
