// Catch2 v2 test runner: provides main() for bcl-torch-tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
