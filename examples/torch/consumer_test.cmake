# Configures, builds and runs the user's project of examples/torch/consumer (the CMakeLists.txt
# docs/torch.md shows) against bcl's source tree, with the libtorch this tree was built with.
#
#   cmake -DSOURCE_DIR=... -DBINARY_DIR=... -DBCL_SOURCE_DIR=... -DTorch_DIR=... -P consumer_test.cmake
cmake_minimum_required(VERSION 3.23)

foreach(_step configure build run)
    if(_step STREQUAL "configure")
        set(_command ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -DCMAKE_BUILD_TYPE=Release
                     -DBCL_SOURCE_DIR=${BCL_SOURCE_DIR} -DTorch_DIR=${Torch_DIR})
    elseif(_step STREQUAL "build")
        set(_command ${CMAKE_COMMAND} --build ${BINARY_DIR} -j 2)
    else()
        set(_command ${BINARY_DIR}/my_trainer)
    endif()
    execute_process(COMMAND ${_command} OUTPUT_VARIABLE _out ERROR_VARIABLE _err
                    RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
        message(FATAL_ERROR "the consumer project's ${_step} failed (${_rc}):\n${_out}\n${_err}")
    endif()
endforeach()
message(STATUS "${_out}")
