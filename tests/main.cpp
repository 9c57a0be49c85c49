// Catch2 v2 test runner: main() for every Catch2 binary of a build tree (bcl_catch_main).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
