#pragma once
// Version of the bcl headers. Kept in step with project(VERSION) in CMakeLists.txt; a test checks
// it.

#include <bcl/detail/config.hpp>

#define BCL_VERSION_MAJOR 0
#define BCL_VERSION_MINOR 1
#define BCL_VERSION_PATCH 0
#define BCL_VERSION_STRING "0.1.0"
