#pragma once
// The number of calls of the global operator new so far in this test binary
// (allocation_counter.cpp replaces it).

long allocation_count() noexcept;
