// bcl-fuzz-balancer: the input chooses a balancer's options and then a sequence of operations
// (push a record with an adversarial cost, pop, drain, finish, save and restore). Every contract
// point is checked against a reference balancer fed the same accepted records in the same order,
// never saved, restored or given an operation that failed:
//   - batch sizes: B each, a short batch (N mod B records) only as the very last one;
//   - batch count: ceil(N/B), floor(N/B) with drop_last;
//   - every accepted record comes out exactly once (the N mod B dropped ones aside), no other;
//   - no record is delayed beyond max_delay_bound(options), and stats() report the delays seen;
//   - determinism and exact resume: the same batches as the reference, in the same order;
//   - an error is a bcl::error (or the estimator's own exception, unchanged), and a failed
//     operation changes nothing: right after it the balancer's saved state equals the reference's.
// Anything else that goes wrong (a crash, a sanitizer report, a hang, an absurd allocation) is a
// finding too.

#include "fuzz_support.hpp"

#include <bcl/balancer.hpp>
#include <bcl/detail/snapshot_check.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace bcl_fuzz;

constexpr std::uint64_t not_accepted = UINT64_MAX;

bool same_bits(double a, double b) {
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

bool same_record(const rec& a, const rec& b) {
    return a.id == b.id && same_bits(a.cost, b.cost) && same_bits(a.memory, b.memory) &&
           same_bits(a.truncated_cost, b.truncated_cost) &&
           a.estimator_throws == b.estimator_throws;
}

// Names the first part of two saved states that differs, for the report.
std::string first_difference(const std::string& mine, const std::string& theirs) {
    bcl::detail::balancer_snapshot a;
    bcl::detail::balancer_snapshot b;
    try {
        a = bcl::detail::snapshot_from_bytes(mine);
    } catch (const bcl::error& e) {
        return std::string("the subject's state does not even read back: ") + e.what();
    }
    try {
        b = bcl::detail::snapshot_from_bytes(theirs);
    } catch (const bcl::error& e) {
        return std::string("the reference's state does not read back: ") + e.what();
    }
    const auto bits = [](const std::vector<double>& v) {
        std::vector<std::uint64_t> out;
        for (const double x : v) out.push_back(std::bit_cast<std::uint64_t>(x));
        return out;
    };
    const bcl::statistics& x = a.stats;
    const bcl::statistics& y = b.stats;
    const std::pair<const char*, bool> parts[] = {
        {"rng_state", a.rng_state == b.rng_state},
        {"finished", a.finished == b.finished},
        {"round", a.round == b.round},
        {"arrival_cost_total", same_bits(a.arrival_cost_total, b.arrival_cost_total)},
        {"last_batch_cost", same_bits(a.last_batch_cost, b.last_batch_cost)},
        {"stats.records_in", x.records_in == y.records_in},
        {"stats.records_out", x.records_out == y.records_out},
        {"stats.records_dropped", x.records_dropped == y.records_dropped},
        {"stats.records_capped", x.records_capped == y.records_capped},
        {"stats.batches", x.batches == y.batches},
        {"stats.windows", x.windows == y.windows},
        {"stats.max_delay_batches", x.max_delay_batches == y.max_delay_batches},
        {"stats.delay_histogram", x.delay_histogram == y.delay_histogram},
        {"quantile_cap", same_bits(a.quantile_cap, b.quantile_cap)},
        {"sketch", a.sketch.count() == b.sketch.count()},
        {"waiting_batch_costs", bits(a.waiting_batch_costs) == bits(b.waiting_batch_costs)},
        {"waiting_batch_memory", bits(a.waiting_batch_memory) == bits(b.waiting_batch_memory)},
        {"waiting_records", a.waiting_records == b.waiting_records},
        {"buffer_costs", bits(a.buffer_costs) == bits(b.buffer_costs)},
        {"buffer_arrivals", a.buffer_arrivals == b.buffer_arrivals},
        {"buffer_memory", bits(a.buffer_memory) == bits(b.buffer_memory)},
    };
    std::string out;
    for (const auto& [name, same] : parts)
        if (!same) out += std::string(out.empty() ? "" : ", ") + name;
    return out.empty() ? "some statistic" : out;
}

template <class Estimator>
class fuzz_run {
public:
    using balancer_t = bcl::balancer<rec, Estimator>;
    using batch = std::vector<std::uint64_t>;

    fuzz_run(const bcl::options& opt, std::unique_ptr<balancer_t> subject,
             std::unique_ptr<balancer_t> reference)
        : m_opt(opt), m_subject(std::move(subject)), m_reference(std::move(reference)) {}

    void step(byte_source& in) {
        const std::uint8_t op = in.byte();
        if (op < 144)
            push(in, (op & 1U) != 0);
        else if (op < 176)
            pop_once();
        else if (op < 200)
            pop_available();
        else if (op < 208)
            finish();
        else if (op < 240)
            save_and_restore(in.byte());
        else if (op >= 248)
            push_repeated(in);
        else
            save_only();
    }

    // Ends the input and drains both balancers, then checks the whole output.
    void conclude() {
        finish();
        const std::size_t bound = m_accepted + 2;
        for (std::size_t guard = 0;; ++guard) {
            require(guard <= bound, "pop() keeps returning batches after finish(): more than " +
                                        std::to_string(bound) + " pops for " +
                                        std::to_string(m_accepted) + " records");
            std::optional<batch> got;
            try {
                got = pop_subject();
            } catch (const bcl::error& e) {
                // Stuck, e.g. an impossible memory budget: the reference must be stuck the same
                // way, and every record must still be somewhere.
                bool reference_failed = false;
                try {
                    (void)m_reference->pop();
                } catch (const bcl::error&) {
                    reference_failed = true;
                }
                require(reference_failed, "the drain failed where the reference's did not");
                expect_same_state("after a pop() while draining that failed with: ", e);
                require(m_emitted + m_subject->buffered() + m_subject->stats().records_dropped ==
                            m_accepted,
                        "records lost: " + std::to_string(m_emitted) + " out + " +
                            std::to_string(m_subject->buffered()) + " buffered + " +
                            std::to_string(m_subject->stats().records_dropped) +
                            " dropped != " + std::to_string(m_accepted) + " in");
                return;
            }
            compare_with_reference(got);
            if (!got) break;
        }
        check_output();
    }

private:
    // The same estimates several times, eagerly popped: windows of ties, or of values whose
    // sum overflows.
    void push_repeated(byte_source& in) {
        const std::size_t times = 2 + in.byte() % 31;
        const rec r = pick_record(in, 0);
        for (std::size_t i = 0; i < times; ++i) {
            push(rec{m_next_id++, r.cost, r.memory, r.truncated_cost, r.estimator_throws}, false);
            pop_available();
        }
    }

    void push(byte_source& in, bool by_copy) { push(pick_record(in, m_next_id++), by_copy); }

    void push(const rec& r, bool by_copy) {
        m_arrival.push_back(not_accepted);
        const bool could_push = m_subject->can_push();
        try {
            if (by_copy) {
                m_subject->push(r);
            } else {
                rec moved = r;
                m_subject->push(std::move(moved));
            }
        } catch (const bcl::error& e) {
            expect_same_state("after a push() that failed with: ", e);
            return;
        } catch (const estimator_failure&) {
            require(r.estimator_throws,
                    "estimator_failure from a record whose estimator does not throw");
            expect_same_state("after a push() whose estimator threw");
            return;
        }
        require(could_push, "push() accepted a record although can_push() was false");
        require(!r.estimator_throws, "push() succeeded although the estimator threw");
        require(std::isfinite(r.cost) && r.cost >= 0.0,
                "push() accepted a record with cost " + std::to_string(r.cost));
        try {
            m_reference->push(rec(r));
        } catch (const std::exception& e) {
            fail(std::string("the reference failed a push() the subject accepted: ") + e.what());
        }
        m_arrival[r.id] = m_accepted++;
    }

    void pop_once() {
        std::optional<batch> got;
        try {
            got = pop_subject();
        } catch (const bcl::error& e) {
            expect_same_state("after a pop() that failed with: ", e);
            return;
        }
        compare_with_reference(got);
    }

    void pop_available() {
        for (std::size_t guard = 0; guard <= m_opt.lookahead + 1; ++guard) {
            std::optional<batch> got;
            try {
                got = pop_subject();
            } catch (const bcl::error& e) {
                expect_same_state("after a pop() that failed with: ", e);
                return;
            }
            compare_with_reference(got);
            if (!got) return;
        }
    }

    void finish() {
        try {
            m_subject->finish();
        } catch (const bcl::error& e) {
            expect_same_state("after a finish() that failed with: ", e);
            return;
        }
        try {
            m_reference->finish();
        } catch (const std::exception& e) {
            fail(std::string("the reference failed a finish() the subject did: ") + e.what());
        }
        require(m_subject->finished(), "finished() is false after finish()");
    }

    // Saves (a copy, or the records moved out), optionally through the byte string, and
    // continues in a new balancer: it must be indistinguishable from the reference.
    void save_and_restore(std::uint8_t how) {
        const bool take = (how & 1U) != 0;
        const bool through_bytes = (how & 2U) != 0;
        typename balancer_t::state st =
            take ? std::move(*m_subject).take_state() : m_subject->save();
        if (take) {
            require(m_subject->buffered() == 0 && m_subject->finished(),
                    "take_state() left records in the balancer or left it unfinished");
            require(!m_subject->pop(), "pop() returned a batch after take_state()");
        }
        const std::string bytes = st.to_bytes();
        try {
            if (through_bytes) st = balancer_t::state::from_bytes(bytes, std::move(st.pending));
            m_subject.reset();
            m_subject = std::make_unique<balancer_t>(
                make_estimator(static_cast<Estimator*>(nullptr)), m_opt, std::move(st));
        } catch (const std::exception& e) {
            fail(std::string("a saved state did not restore: ") + e.what());
        }
        const std::string again = m_subject->save().to_bytes();
        if (again != bytes)
            fail("a restored balancer saves a different state than the one it was restored from "
                 "(in " +
                 first_difference(again, bytes) + ")");
        expect_same_state("after save and restore");
    }

    void save_only() {
        const typename balancer_t::state st = m_subject->save();
        require(st.pending.size() == m_subject->buffered(),
                "save() holds " + std::to_string(st.pending.size()) + " records, buffered() says " +
                    std::to_string(m_subject->buffered()));
        try {
            (void)balancer_t::state::from_bytes(st.to_bytes(), st.pending);
        } catch (const std::exception& e) {
            fail(std::string("the bytes of a saved state do not read back: ") + e.what());
        }
    }

    std::optional<batch> pop_subject() {
        const auto got = m_subject->pop();
        if (!got) return std::nullopt;
        batch ids;
        ids.reserve(got->size());
        for (const rec& r : *got) ids.push_back(r.id);
        return ids;
    }

    void compare_with_reference(const std::optional<batch>& got) {
        std::optional<typename balancer_t::batch_type> expected;
        try {
            expected = m_reference->pop();
        } catch (const std::exception& e) {
            fail(std::string("the reference failed a pop() the subject did: ") + e.what());
        }
        require(got.has_value() == expected.has_value(),
                got ? "pop() returned a batch where the reference returned none"
                    : "pop() returned no batch where the reference returned one");
        if (!got) return;
        require(got->size() == expected->size(),
                "pop() returned a batch of " + std::to_string(got->size()) +
                    " records, the reference one of " + std::to_string(expected->size()));
        for (std::size_t i = 0; i < got->size(); ++i)
            require((*got)[i] == (*expected)[i].id,
                    "batch " + std::to_string(m_batches.size()) +
                        " differs from the reference's at position " + std::to_string(i));
        require(same_bits(m_subject->last_batch_cost(), m_reference->last_batch_cost()),
                "last_batch_cost() differs from the reference's");
        m_emitted += got->size();
        m_batches.push_back(*got);
    }

    // The subject must be in exactly the reference's state: equal saved bytes and equal pending
    // records, in the same order.
    void expect_same_state(const char* when, const bcl::error& e) {
        expect_same_state((when + std::string(e.what())).c_str());
    }
    void expect_same_state(const char* when) {
        const typename balancer_t::state mine = m_subject->save();
        const typename balancer_t::state theirs = m_reference->save();
        const std::string my_bytes = mine.to_bytes();
        const std::string their_bytes = theirs.to_bytes();
        if (my_bytes != their_bytes)
            fail(std::string("the saved state differs from the reference's (in ") +
                 first_difference(my_bytes, their_bytes) + ") " + when);
        require(mine.pending.size() == theirs.pending.size(),
                std::string("the pending records differ from the reference's ") + when);
        for (std::size_t i = 0; i < mine.pending.size(); ++i)
            require(same_record(mine.pending[i], theirs.pending[i]),
                    std::string("pending record ") + std::to_string(i) +
                        " differs from the reference's " + when);
        require(m_subject->can_push() == m_reference->can_push() &&
                    m_subject->finished() == m_reference->finished(),
                std::string("can_push() or finished() differs from the reference's ") + when);
    }

    void check_output() const {
        const std::size_t b = m_opt.batch_size;
        const std::size_t n = m_accepted;
        const std::size_t expected_batches = m_opt.drop_last ? n / b : (n + b - 1) / b;
        require(m_batches.size() == expected_batches,
                std::to_string(m_batches.size()) + " batches for " + std::to_string(n) +
                    " records of batch size " + std::to_string(b) + ", expected " +
                    std::to_string(expected_batches));
        for (std::size_t j = 0; j < m_batches.size(); ++j) {
            const bool last = j + 1 == m_batches.size();
            const std::size_t expected_size = last && !m_opt.drop_last && n % b != 0 ? n % b : b;
            require(m_batches[j].size() == expected_size,
                    "batch " + std::to_string(j) + " has " + std::to_string(m_batches[j].size()) +
                        " records, expected " + std::to_string(expected_size));
        }
        // Exactly once, and within the delay bound.
        std::vector<bool> seen(m_arrival.size(), false);
        std::uint64_t max_delay = 0;
        const std::uint64_t bound = bcl::max_delay_bound(m_opt);
        for (std::size_t j = 0; j < m_batches.size(); ++j)
            for (const std::uint64_t id : m_batches[j]) {
                require(id < m_arrival.size() && m_arrival[id] != not_accepted,
                        "record " + std::to_string(id) + " was never accepted but came out");
                require(!seen[id], "record " + std::to_string(id) + " came out twice");
                seen[id] = true;
                const std::uint64_t arrival_batch = m_arrival[id] / b;
                const std::uint64_t delay = j > arrival_batch ? j - arrival_batch : 0;
                require(delay <= bound, "record " + std::to_string(id) + " left " +
                                            std::to_string(delay) + " batches late, bound " +
                                            std::to_string(bound));
                max_delay = std::max(max_delay, delay);
            }
        const std::size_t dropped = m_opt.drop_last ? n % b : 0;
        require(m_emitted + dropped == n, std::to_string(m_emitted) + " records out and " +
                                              std::to_string(dropped) + " dropped of " +
                                              std::to_string(n));
        if (m_opt.drop_last && m_opt.policy == bcl::lookahead_policy::tumbling) {
            // The dropped records are the last N mod B pushed.
            std::size_t missing_from_tail = 0;
            for (std::uint64_t id = m_arrival.size(); id-- > 0 && missing_from_tail < dropped;)
                if (m_arrival[id] != not_accepted) {
                    require(!seen[id], "tumbling drop_last kept record " + std::to_string(id) +
                                           ", one of the last N mod B pushed");
                    ++missing_from_tail;
                }
        }
        const bcl::statistics& s = m_subject->stats();
        const bcl::statistics& r = m_reference->stats();
        require(s.records_in == n && s.records_out == m_emitted && s.records_dropped == dropped &&
                    s.batches == m_batches.size(),
                "stats() counters disagree with what was pushed and popped");
        require(s.records_capped == r.records_capped && s.windows == r.windows &&
                    s.delay_histogram == r.delay_histogram,
                "stats() differ from the reference's");
        require(s.max_delay_batches == max_delay,
                "stats().max_delay_batches is " + std::to_string(s.max_delay_batches) +
                    ", the batches show " + std::to_string(max_delay));
        std::uint64_t histogram_total = 0;
        for (const std::uint64_t c : s.delay_histogram) histogram_total += c;
        require(histogram_total == m_emitted && s.delay_batches.count() == m_emitted,
                "the delay histogram does not count every record handed out");
        require(m_subject->buffered() == 0, "records still buffered after the drain");
    }

    bcl::options m_opt;
    std::unique_ptr<balancer_t> m_subject;
    std::unique_ptr<balancer_t> m_reference;
    std::vector<std::uint64_t> m_arrival; // per push attempt: arrival position, or not_accepted
    std::vector<batch> m_batches;         // the subject's batches, as record ids
    std::uint64_t m_next_id = 0;
    std::uint64_t m_accepted = 0;
    std::size_t m_emitted = 0;
};

template <class Estimator>
void run(const bcl::options& opt, byte_source& in) {
    using balancer_t = bcl::balancer<rec, Estimator>;
    std::unique_ptr<balancer_t> subject;
    try {
        subject =
            std::make_unique<balancer_t>(make_estimator(static_cast<Estimator*>(nullptr)), opt);
    } catch (const bcl::error&) {
        return; // invalid options are refused: fine
    }
    auto reference =
        std::make_unique<balancer_t>(make_estimator(static_cast<Estimator*>(nullptr)), opt);
    fuzz_run<Estimator> r(opt, std::move(subject), std::move(reference));
    constexpr int max_steps = 4096;
    for (int i = 0; i < max_steps && !in.empty(); ++i) r.step(in);
    r.conclude();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    byte_source in(std::span<const std::uint8_t>(data, size));
    bool memory = false;
    const bcl::options opt = pick_options(in, memory);
    // Nothing is caught here: an exception that escapes (anything but a bcl::error, which the
    // operations catch) ends in std::terminate at the throw, so the report shows where it came
    // from.
    if (memory)
        run<memory_estimator>(opt, in);
    else
        run<plain_estimator>(opt, in);
    return 0;
}
