# Shared build settings for every ceiling target.
add_library(ceiling_warnings INTERFACE)
target_compile_options(ceiling_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${CEILING_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall>
  # fmt 9 switches its constexpr support off under nvcc, after which the C++20 host pass rejects
  # fmt's headers (and Status::error / fail in .cu files); switch it back on.
  $<$<COMPILE_LANGUAGE:CUDA>:-DFMT_USE_CONSTEXPR=1>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${CEILING_WERROR}>>:-Werror=all-warnings>)

# ceiling_library(NAME SOURCES... [DEPS ...]) — a static module library under src/.
function(ceiling_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ceiling_warnings)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# ceiling_test(NAME SOURCES... [DEPS ...] [LABELS ...]) — a GoogleTest binary registered with ctest.
# Tests labelled `gpu` skip themselves (GTEST_SKIP) when no CUDA device is present.
function(ceiling_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main ceiling_warnings)
  target_compile_definitions(${name} PRIVATE
    CEILING_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    CEILING_DATA_DIR="${PROJECT_SOURCE_DIR}/data")
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
  if(ARG_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  else()
    set_tests_properties(${name} PROPERTIES TIMEOUT 300)
  endif()
  # A skipped GoogleTest prints [  SKIPPED ]; ctest shows such a test as skipped, not passed.
  set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endfunction()
