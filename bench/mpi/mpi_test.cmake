# Runs bcl-mpi-bench under mpirun for ctest, and checks the outcome.
#
#   cmake -DMPIEXEC=mpirun -DPREFLAGS= -DWATCHDOG=40 -DMODE=run|fail [-DSTEPS=n] [-DPATTERN=text]
#         "-DARGS=-n|4|bcl-mpi-bench|--steps|48" -P mpi_test.cmake
#
# ARGS is the job as mpirun takes it ('|'-separated; a ':' element starts another application
# context). This script puts the launcher's global flags in front, decided here, at test time:
#   Open MPI:  --oversubscribe (more ranks than cores is fine: the ranks sleep), --timeout
#              WATCHDOG (Open MPI kills a hung job itself), and --allow-run-as-root only when
#              `id -u` is 0 (containers and CI often run as root; elsewhere the flag is not used).
#   others:    nothing; MPICH's mpiexec oversubscribes by default and runs as root as it is.
#
# MODE run:  exit code 0; JSON on stdout with config.ranks = number of ranks requested, every
#            policy with the same batch count on every rank (= STEPS) and full batches, and,
#            when tumbling ran, a measured speedup above 1 for it. When global ran: every rank
#            planned alike (same_plan), and its predicted efficiency, computed from the batch
#            costs the ranks ran (no clock involved), is at least every other row's (the global
#            plan balances across ranks, which no rank-local policy can).
# MODE fail: a non-zero exit code (not a timeout), and PATTERN (plain text) in the output.
cmake_minimum_required(VERSION 3.23)

string(REPLACE "|" ";" _job "${ARGS}")
separate_arguments(_preflags UNIX_COMMAND "${PREFLAGS}")

execute_process(COMMAND ${MPIEXEC} --version
                OUTPUT_VARIABLE _version ERROR_VARIABLE _version RESULT_VARIABLE _ignored)
set(_launcher ${MPIEXEC})
if(_version MATCHES "Open MPI|OpenRTE")
    list(APPEND _launcher --oversubscribe --timeout ${WATCHDOG})
    execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _id_rc)
    if(_id_rc EQUAL 0 AND _uid STREQUAL "0")
        list(APPEND _launcher --allow-run-as-root)
    endif()
endif()
list(APPEND _launcher ${_preflags})

# Second line of defence if the launcher ignores its watchdog; ctest's TIMEOUT is the third.
math(EXPR _limit "${WATCHDOG} + 10")
list(JOIN _launcher " " _shown_launcher)
list(JOIN _job " " _shown_job)
message(STATUS "running: ${_shown_launcher} ${_shown_job}")
execute_process(COMMAND ${_launcher} ${_job}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err
                TIMEOUT ${_limit})
set(_all "stdout:\n${_out}\nstderr:\n${_err}")

if(NOT _rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "mpirun did not finish by itself (${_rc}): a hang?\n${_all}")
endif()
if("${_out}${_err}" MATCHES "time limit for job execution has been reached")
    message(FATAL_ERROR "the job hung until mpirun's --timeout ${WATCHDOG} killed it\n${_all}")
endif()
if(MODE STREQUAL "fail")
    if(_rc EQUAL 0)
        message(FATAL_ERROR "expected a non-zero exit code, got 0\n${_all}")
    endif()
    string(FIND "${_out}${_err}" "${PATTERN}" _at)
    if(_at EQUAL -1)
        message(FATAL_ERROR "the output does not mention '${PATTERN}'\n${_all}")
    endif()
    message(STATUS "exit code ${_rc} as expected:\n${_err}")
    return()
endif()

if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "exit code ${_rc}\n${_all}")
endif()
# Launchers may print notices; the JSON document is rank 0's, from its first '{' on.
string(FIND "${_out}" "{" _start)
if(_start EQUAL -1)
    message(FATAL_ERROR "no JSON on stdout\n${_all}")
endif()
string(SUBSTRING "${_out}" ${_start} -1 _json)

# The number of ranks asked for: the sum of every context's count after the -n/-np flag.
set(_expected_ranks 0)
set(_take_next OFF)
foreach(_a IN LISTS _job)
    if(_take_next)
        math(EXPR _expected_ranks "${_expected_ranks} + ${_a}")
        set(_take_next OFF)
    elseif(_a MATCHES "^-(n|np|c)$|^--n$|^--np$")
        set(_take_next ON)
    endif()
endforeach()

string(JSON _ranks GET "${_json}" config ranks)
if(NOT _ranks EQUAL _expected_ranks)
    message(FATAL_ERROR "config.ranks is ${_ranks}, expected ${_expected_ranks}\n${_all}")
endif()
string(JSON _n LENGTH "${_json}" policies)
if(_n LESS 1)
    message(FATAL_ERROR "no policies in the output\n${_all}")
endif()
set(_tumbling_speedup "")
set(_global_efficiency "")
set(_best_other_efficiency 0)
set(_best_other "")
math(EXPR _last "${_n} - 1")
foreach(_i RANGE ${_last})
    string(JSON _name GET "${_json}" policies ${_i} policy)
    foreach(_field wall_s mean_step_ms measured_speedup_vs_none predicted_speedup_vs_none)
        string(JSON _type TYPE "${_json}" policies ${_i} ${_field})
        if(NOT _type STREQUAL "NUMBER")
            message(FATAL_ERROR "${_name}: ${_field} is not a number\n${_all}")
        endif()
    endforeach()
    string(JSON _min GET "${_json}" policies ${_i} batches_min)
    string(JSON _max GET "${_json}" policies ${_i} batches_max)
    string(JSON _same GET "${_json}" policies ${_i} same_batch_count)
    string(JSON _full GET "${_json}" policies ${_i} contract_ok)
    if(NOT _min EQUAL _max OR NOT _same)
        message(FATAL_ERROR "${_name}: batch counts differ across ranks (${_min}..${_max})\n${_all}")
    endif()
    if(DEFINED STEPS AND NOT STEPS STREQUAL "" AND NOT _max EQUAL STEPS)
        message(FATAL_ERROR "${_name}: ${_max} batches per rank, expected ${STEPS}\n${_all}")
    endif()
    if(NOT _full)
        message(FATAL_ERROR "${_name}: a short batch or a lost record\n${_all}")
    endif()
    string(JSON _measured GET "${_json}" policies ${_i} measured_speedup_vs_none)
    string(JSON _predicted GET "${_json}" policies ${_i} predicted_speedup_vs_none)
    message(STATUS "${_name}: ${_max} batches on every rank, measured speedup ${_measured}, "
                   "predicted ${_predicted}")
    string(JSON _efficiency GET "${_json}" policies ${_i} predicted_efficiency)
    string(JSON _same_plan GET "${_json}" policies ${_i} same_plan)
    if(NOT _same_plan)
        message(FATAL_ERROR "${_name}: the ranks' plans differ\n${_all}")
    endif()
    if(_name STREQUAL "tumbling")
        set(_tumbling_speedup ${_measured})
    endif()
    if(_name STREQUAL "global")
        set(_global_efficiency ${_efficiency})
    elseif(_efficiency GREATER _best_other_efficiency)
        set(_best_other_efficiency ${_efficiency})
        set(_best_other ${_name})
    endif()
endforeach()

# The policies that ran, as the bench reports them.
string(JSON _np LENGTH "${_json}" config policies)
set(_ran "")
math(EXPR _plast "${_np} - 1")
foreach(_i RANGE ${_plast})
    string(JSON _p GET "${_json}" config policies ${_i})
    list(APPEND _ran ${_p})
endforeach()

if("tumbling" IN_LIST _ran)
    if(_tumbling_speedup STREQUAL "")
        message(FATAL_ERROR "no tumbling result\n${_all}")
    endif()
    # CMake compares numbers as doubles; "1.0" would fail as it should.
    if(NOT _tumbling_speedup GREATER 1)
        message(FATAL_ERROR "tumbling measured speedup ${_tumbling_speedup} is not above 1\n${_all}")
    endif()
endif()
if("global" IN_LIST _ran)
    if(_global_efficiency STREQUAL "")
        message(FATAL_ERROR "no global result\n${_all}")
    endif()
    if(_global_efficiency LESS _best_other_efficiency)
        message(FATAL_ERROR "global's predicted efficiency ${_global_efficiency} is below "
                            "${_best_other}'s ${_best_other_efficiency}\n${_all}")
    endif()
    message(STATUS "global: predicted efficiency ${_global_efficiency}, best other "
                   "${_best_other_efficiency} (${_best_other})")
endif()
