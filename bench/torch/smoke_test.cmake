# Runs bcl-torch-train on 2 MPI ranks for a few steps of every policy at a tiny length scale and
# checks its JSON: the fit, and for each of none, tumbling, sliding and global the fields
# docs/torch.md describes, with positive step times and none's measured speedup exactly 1.
#
#   cmake -DMPIEXEC=mpirun -DPROGRAM=build/bin/bcl-torch-train -P smoke_test.cmake
cmake_minimum_required(VERSION 3.23)

set(_launcher ${MPIEXEC})
execute_process(COMMAND ${MPIEXEC} --version
                OUTPUT_VARIABLE _version ERROR_VARIABLE _version RESULT_VARIABLE _ignored)
if(_version MATCHES "Open MPI|OpenRTE")
    # More ranks than free cores is fine here; Open MPI's watchdog ends a hung job.
    list(APPEND _launcher --oversubscribe --timeout 100)
    execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_uid STREQUAL "0")
        list(APPEND _launcher --allow-run-as-root)
    endif()
endif()

execute_process(
    COMMAND ${_launcher} -np 2 ${PROGRAM} --policy none,tumbling,sliding,global --steps 8 --block 4
            --repeats 2 --warmup 1 --length-scale 0.01 --format json
    OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc TIMEOUT 110)
if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "bcl-torch-train failed (${_rc}):\n${_out}\n${_err}")
endif()

string(JSON _ranks ERROR_VARIABLE _e GET "${_out}" config ranks)
if(_e OR NOT _ranks EQUAL 2)
    message(FATAL_ERROR "config.ranks is not 2 (${_e}):\n${_out}")
endif()
foreach(_key a b c r2)
    string(JSON _v ERROR_VARIABLE _e GET "${_out}" fit ${_key})
    if(_e)
        message(FATAL_ERROR "no fit.${_key}: ${_e}\n${_out}")
    endif()
endforeach()
string(JSON _n ERROR_VARIABLE _e LENGTH "${_out}" policies)
if(_e OR NOT _n EQUAL 4)
    message(FATAL_ERROR "policies does not list 4 policies (${_e}):\n${_out}")
endif()
set(_expected none tumbling sliding global)
math(EXPR _last "${_n} - 1")
foreach(_i RANGE ${_last})
    list(GET _expected ${_i} _want)
    string(JSON _policy GET "${_out}" policies ${_i} policy)
    if(NOT _policy STREQUAL _want)
        message(FATAL_ERROR "policies[${_i}].policy is '${_policy}', not '${_want}'")
    endif()
    foreach(_key step_seconds measured_speedup predicted_speedup sampler_seconds_share)
        string(JSON _v ERROR_VARIABLE _e GET "${_out}" policies ${_i} ${_key})
        if(_e)
            message(FATAL_ERROR "no policies[${_i}].${_key}: ${_e}\n${_out}")
        endif()
        if(NOT _key STREQUAL "sampler_seconds_share" AND NOT _v GREATER 0)
            message(FATAL_ERROR "policies[${_i}].${_key} = ${_v} is not > 0")
        endif()
    endforeach()
endforeach()
string(JSON _none GET "${_out}" policies 0 measured_speedup)
if(NOT _none EQUAL 1)
    message(FATAL_ERROR "none's measured speedup against itself is ${_none}, not 1")
endif()
message(STATUS "bcl-torch-train on 2 ranks: JSON has the fit and every policy's fields")
