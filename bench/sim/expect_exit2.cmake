# Runs bcl-sim with bad input and checks that it fails the documented way: exit code 2 and an
# error message on stderr that contains PATTERN (a plain substring, not a regex).
#   cmake -DBCL_SIM=path/to/bcl-sim -DARGS="a|b|c" -DPATTERN=text -P expect_exit2.cmake
cmake_minimum_required(VERSION 3.23)
string(REPLACE "|" ";" _args "${ARGS}")
execute_process(COMMAND ${BCL_SIM} ${_args}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 2)
    message(FATAL_ERROR "expected exit code 2, got '${_rc}'\nstdout:\n${_out}\nstderr:\n${_err}")
endif()
string(FIND "${_err}" "${PATTERN}" _at)
if(_at EQUAL -1)
    message(FATAL_ERROR "stderr does not mention '${PATTERN}':\n${_err}")
endif()
message(STATUS "exit code 2 with: ${_err}")
