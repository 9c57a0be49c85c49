#pragma once
// The complete state of a bcl::running_stats, so a balancer can save and restore it exactly.

#include <bcl/detail/config.hpp>

#include <bcl/statistics.hpp>

#include <cstdint>

namespace bcl::detail {

struct stats_access {
    struct raw {
        std::uint64_t count = 0;
        double mean = 0.0;
        double m2 = 0.0;
        double min = 0.0;
        double max = 0.0;
    };

    [[nodiscard]] static raw read(const running_stats& s) noexcept {
        return {s.m_count, s.m_mean, s.m_m2, s.m_min, s.m_max};
    }
    [[nodiscard]] static running_stats make(const raw& r) noexcept {
        running_stats s;
        s.m_count = r.count;
        s.m_mean = r.mean;
        s.m_m2 = r.m2;
        s.m_min = r.min;
        s.m_max = r.max;
        return s;
    }
};

} // namespace bcl::detail
