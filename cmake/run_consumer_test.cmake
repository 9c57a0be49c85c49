# Run with `cmake -P` (registered as the ctest test installed_package_consumer).
#
# 1. cmake --install  <BCL_BINARY_DIR>  into  <BCL_WORK_DIR>/prefix
# 2. configure BCL_CONSUMER_SOURCE_DIR with CMAKE_PREFIX_PATH=<prefix>
# 3. build it and run the resulting `consumer` executable
#
# Inputs (-D): BCL_BINARY_DIR, BCL_CONSUMER_SOURCE_DIR, BCL_WORK_DIR,
# optional BCL_CONFIG, BCL_GENERATOR, BCL_MAKE_PROGRAM, BCL_CXX_COMPILER.

foreach(_var IN ITEMS BCL_BINARY_DIR BCL_CONSUMER_SOURCE_DIR BCL_WORK_DIR)
    if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
        message(FATAL_ERROR "run_consumer_test.cmake: -D${_var}=... is required")
    endif()
endforeach()

if(NOT BCL_CONFIG)
    set(BCL_CONFIG Release)
endif()

set(_prefix ${BCL_WORK_DIR}/prefix)
set(_build ${BCL_WORK_DIR}/build)

# Start from scratch each time so stale files cannot hide a broken install.
file(REMOVE_RECURSE ${BCL_WORK_DIR})
file(MAKE_DIRECTORY ${BCL_WORK_DIR})

function(bcl_run_step name)
    list(JOIN ARGN " " _pretty)
    message(STATUS "[${name}] ${_pretty}")
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
        message(FATAL_ERROR "installed_package_consumer: step '${name}' failed (${_rc})")
    endif()
endfunction()

bcl_run_step(install
    ${CMAKE_COMMAND} --install ${BCL_BINARY_DIR} --prefix ${_prefix} --config ${BCL_CONFIG})

set(_configure_args
    -S ${BCL_CONSUMER_SOURCE_DIR}
    -B ${_build}
    -DCMAKE_PREFIX_PATH=${_prefix}
    -DCMAKE_BUILD_TYPE=${BCL_CONFIG}
    # Make sure only the freshly installed copy can satisfy find_package(bcl).
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(BCL_GENERATOR)
    list(APPEND _configure_args -G ${BCL_GENERATOR})
endif()
if(BCL_MAKE_PROGRAM)
    list(APPEND _configure_args -DCMAKE_MAKE_PROGRAM=${BCL_MAKE_PROGRAM})
endif()
if(BCL_CXX_COMPILER)
    list(APPEND _configure_args -DCMAKE_CXX_COMPILER=${BCL_CXX_COMPILER})
endif()

bcl_run_step(configure ${CMAKE_COMMAND} ${_configure_args})
bcl_run_step(build ${CMAKE_COMMAND} --build ${_build} --config ${BCL_CONFIG})

# Single-config generators put the binary at the top, multi-config ones in a
# per-configuration subdirectory.
set(_exe "")
foreach(_candidate IN ITEMS
        ${_build}/consumer ${_build}/consumer.exe
        ${_build}/${BCL_CONFIG}/consumer ${_build}/${BCL_CONFIG}/consumer.exe)
    if(EXISTS ${_candidate} AND NOT IS_DIRECTORY ${_candidate})
        set(_exe ${_candidate})
        break()
    endif()
endforeach()
if(NOT _exe)
    message(FATAL_ERROR "installed_package_consumer: built consumer executable not found under ${_build}")
endif()

bcl_run_step(run ${_exe})
message(STATUS "installed_package_consumer: OK")
