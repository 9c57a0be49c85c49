# Runs a program with bad input and checks that it fails the documented way: exit code 2 and a
# one-line error message on stderr that contains PATTERN (a plain substring, not a regex).
#   cmake -DPROGRAM=path/to/program -DARGS="a|b|c" -DPATTERN=text -P expect_exit2.cmake
# bcl-sim's and the examples' tests use it.
cmake_minimum_required(VERSION 3.23)
string(REPLACE "|" ";" _args "${ARGS}")
execute_process(COMMAND ${PROGRAM} ${_args}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 2)
    message(FATAL_ERROR "expected exit code 2, got '${_rc}'\nstdout:\n${_out}\nstderr:\n${_err}")
endif()
string(FIND "${_err}" "${PATTERN}" _at)
if(_at EQUAL -1)
    message(FATAL_ERROR "stderr does not mention '${PATTERN}':\n${_err}")
endif()
string(FIND "${_err}" "\n" _first_newline)
string(LENGTH "${_err}" _length)
math(EXPR _last "${_length} - 1")
if(NOT _first_newline EQUAL _last)
    message(FATAL_ERROR "stderr is not one line ending in a newline:\n${_err}")
endif()
message(STATUS "exit code 2 with: ${_err}")
