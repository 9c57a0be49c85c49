// bcl::detail::stream_history: the mean cost of a stream's records over every epoch, and what
// the epochs before the current one counted. An epoch's statistics start afresh; the mean does
// not.

#include <bcl/detail/intake/stream_history.hpp>
#include <bcl/statistics.hpp>

#include <catch2/catch.hpp>

#include <cstdint>

TEST_CASE("The mean cost is the option when set, else the mean of every record accepted",
          "[stream-history]") {
    bcl::detail::stream_history h;
    CHECK(h.mean_cost(0.0, 0) == 0.0); // nothing seen: no mean
    h.accept(2.0);
    h.accept(4.0);
    CHECK(h.mean_cost(0.0, 2) == 3.0);
    CHECK(h.mean_cost(7.5, 2) == 7.5);
}

TEST_CASE("An epoch's counts join the earlier epochs' and its statistics start afresh, keeping "
          "the mean over both",
          "[stream-history]") {
    bcl::detail::stream_history h;
    bcl::statistics st;
    st.records_in = 3;
    st.windows = 2;
    st.batches = 5;
    st.batch_cost.add(9.0);
    st.delay_histogram.assign(4, 1);
    for (const double c : {1.0, 2.0, 3.0}) h.accept(c);
    h.next_epoch(st);
    CHECK(h.earlier().records == 3);
    CHECK(h.earlier().rounds == 2);
    CHECK(h.earlier().batches == 5);
    CHECK(st.records_in == 0);
    CHECK(st.batches == 0);
    CHECK(st.batch_cost.count() == 0);
    CHECK(st.delay_histogram.empty());
    CHECK(st.delay_histogram.capacity() >= 4); // its room kept: the next epoch allocates nothing
    // The next epoch's record counts with the earlier three.
    h.accept(10.0);
    CHECK(h.mean_cost(0.0, 1) == (1.0 + 2.0 + 3.0 + 10.0) / 4.0);
}

TEST_CASE("The history saves its part of a state and continues from it", "[stream-history]") {
    bcl::detail::stream_history::saved saved;
    bcl::detail::stream_history h;
    bcl::statistics st;
    st.records_in = 2;
    h.accept(5.0);
    h.accept(7.0);
    h.next_epoch(st);
    h.save_into(saved);
    bcl::detail::stream_history restored;
    restored.restore_from(saved);
    CHECK(restored.earlier().records == 2);
    CHECK(restored.mean_cost(0.0, 0) == 6.0);
}
