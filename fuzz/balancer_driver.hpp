#pragma once
// The harness bcl-fuzz-balancer and bcl-fuzz-calibration share: a balancer (the subject) driven
// by the input through push, pop, drain, finish, save and restore, checked against a reference
// balancer fed the same accepted records in the same order, never saved, restored or given an
// operation that failed. What it checks, for any estimator:
//   - batch sizes: B each, a short batch (N mod B records) only as the very last one;
//   - batch count: ceil(N/B), floor(N/B) with drop_last;
//   - every accepted record comes out exactly once (the N mod B dropped ones aside), no other;
//   - no record is delayed beyond max_delay_bound(options), and stats() report the delays seen,
//     the batches handed out so far, and at most one round per push;
//   - determinism and exact resume: the same batches as the reference, in the same order, the
//     same records bit for bit;
//   - an error is a bcl::error (or the estimator's own exception, unchanged), and a failed
//     operation changes nothing: right after it the balancer's saved state equals the reference's.
//
// A target derives from balancer_driver<itself, Estimator> (the curiously recurring template)
// and supplies, as public members:
//   void step(byte_source&)                 reads one operation and calls the driver's (or its own)
//   rec pick(byte_source&, std::uint64_t)   a record with the given id, from the input
//   Estimator make_estimator() const        the estimator a restored balancer gets
// and may hide conclude() or save_and_restore() to add checks around the driver's.

#include "fuzz_support.hpp"
#include "state_checks.hpp"

#include <bcl/balancer.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <algorithm>
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

namespace bcl_fuzz {

/// A balancer, or none if it refuses the options (fine: nothing to fuzz).
template <class Estimator>
std::unique_ptr<bcl::balancer<rec, Estimator>> make_balancer(const Estimator& estimator,
                                                             const bcl::options& opt) {
    try {
        return std::make_unique<bcl::balancer<rec, Estimator>>(estimator, opt);
    } catch (const bcl::error&) {
        return nullptr;
    }
}

template <class Target, class Estimator>
class balancer_driver {
public:
    using balancer_t = bcl::balancer<rec, Estimator>;
    using batch = std::vector<rec>;

    /// Runs the input's operations (at most 4096), then concludes.
    void run(byte_source& in) {
        constexpr int max_steps = 4096;
        for (int i = 0; i < max_steps && !in.empty(); ++i) target().step(in);
        target().conclude();
    }

    /// Ends the input, drains both balancers, then checks the whole output.
    void conclude() {
        const bool drained = drain();
        note_run();
        if (drained) check_output();
    }

protected:
    balancer_driver(const bcl::options& opt, std::unique_ptr<balancer_t> the_subject,
                    std::unique_ptr<balancer_t> the_reference)
        : m_opt(opt), m_subject(std::move(the_subject)), m_reference(std::move(the_reference)) {}

    [[nodiscard]] const bcl::options& opt() const noexcept { return m_opt; }
    [[nodiscard]] balancer_t& subject() noexcept { return *m_subject; }
    [[nodiscard]] balancer_t& reference() noexcept { return *m_reference; }
    /// The subject's batches so far, as it handed them out.
    [[nodiscard]] const std::vector<batch>& batches() const noexcept { return m_batches; }
    /// The id the next record pushed gets (ids count push attempts).
    [[nodiscard]] std::uint64_t next_id() const noexcept { return m_next_id; }

    // ---- the operations ----

    void push(byte_source& in, bool by_copy) { push(target().pick(in, m_next_id++), by_copy); }

    // The same estimates several times, eagerly popped: windows of ties, or of values whose
    // sum overflows.
    void push_repeated(byte_source& in) {
        const std::size_t times = 2 + in.byte() % 31;
        const rec r = target().pick(in, 0);
        for (std::size_t i = 0; i < times; ++i) {
            rec copy = r;
            copy.id = m_next_id++;
            push(copy, false);
            pop_available();
        }
    }

    void push(const rec& r, bool by_copy) {
        m_arrival.push_back(not_accepted);
        const bool could_push = m_subject->can_push();
        const std::uint64_t windows = m_subject->stats().windows;
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
            ++m_failed;
            expect_same_state("after a push() whose estimator threw");
            return;
        }
        require(could_push, "push() accepted a record although can_push() was false");
        require(!r.estimator_throws, "push() succeeded although the estimator threw");
        check(std::isfinite(r.cost) && r.cost >= 0.0,
              [&] { return "push() accepted a record whose estimator reads " + text(r.cost); });
        try {
            m_reference->push(rec(r));
        } catch (const std::exception& e) {
            fail(std::string("the reference failed a push() the subject accepted: ") + e.what());
        }
        m_arrival[r.id] = m_accepted++;
        require(m_subject->stats().windows - windows <= 1, "one push() ran more than one round");
    }

    void pop_once() { (void)pop_checked(); }

    // Pops until nothing is ready (at most K + 2 times, a bound no balancer should reach).
    void pop_available() {
        for (std::size_t guard = 0; guard <= m_opt.lookahead + 1 && pop_checked(); ++guard) {
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
            m_subject =
                std::make_unique<balancer_t>(target().make_estimator(), m_opt, std::move(st));
        } catch (const std::exception& e) {
            fail(std::string("a saved state did not restore: ") + e.what());
        }
        const std::string again = m_subject->save().to_bytes();
        if (again != bytes)
            fail("a restored balancer saves a different state than the one it was restored from "
                 "(in " +
                 first_difference(again, bytes) + ")");
        ++m_restores;
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

    // ---- the checks ----

    // finish(), then pops until nothing is left, each batch against the reference's. False when
    // the drain got stuck (e.g. an impossible memory budget): then the reference must be stuck
    // the same way, and every record must still be somewhere.
    bool drain() {
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
                return false;
            }
            compare_with_reference(got);
            if (!got) return true;
        }
    }

    // For describe_inputs: what the run did, to tell whether a seed reaches what it is for.
    void note_run() const {
        note([&] {
            const bcl::statistics& s = m_subject->stats();
            return "ran: " + std::to_string(m_next_id) + " pushes, " + std::to_string(m_accepted) +
                   " accepted, " + std::to_string(m_batches.size()) + " batches in " +
                   std::to_string(s.windows) + " rounds, " + std::to_string(s.records_capped) +
                   " capped, peak memory " + text(s.peak_batch_memory) + ", " +
                   std::to_string(s.records_dropped) + " dropped, " + std::to_string(m_failed) +
                   " failed operations, " + std::to_string(m_restores) + " restores";
        });
    }

    // The subject must be in exactly the reference's state: equal saved bytes and equal pending
    // records, in the same order.
    void expect_same_state(const char* when, const bcl::error& e) {
        ++m_failed;
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
            check(same_record(mine.pending[i], theirs.pending[i]), [&] {
                return "pending record " + std::to_string(i) + " differs from the reference's " +
                       when;
            });
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
            check(m_batches[j].size() == expected_size, [&] {
                return "batch " + std::to_string(j) + " has " +
                       std::to_string(m_batches[j].size()) + " records, expected " +
                       std::to_string(expected_size);
            });
        }
        // Exactly once, and within the delay bound.
        std::vector<bool> seen(m_arrival.size(), false);
        std::uint64_t max_delay = 0;
        const std::uint64_t bound = bcl::max_delay_bound(m_opt);
        for (std::size_t j = 0; j < m_batches.size(); ++j)
            for (const rec& r : m_batches[j]) {
                const std::uint64_t id = r.id;
                check(id < m_arrival.size() && m_arrival[id] != not_accepted, [&] {
                    return "record " + std::to_string(id) + " was never accepted but came out";
                });
                check(!seen[id],
                      [&] { return "record " + std::to_string(id) + " came out twice"; });
                seen[id] = true;
                const std::uint64_t arrival_batch = m_arrival[id] / b;
                const std::uint64_t delay = j > arrival_batch ? j - arrival_batch : 0;
                check(delay <= bound, [&] {
                    return "record " + std::to_string(id) + " left " + std::to_string(delay) +
                           " batches late, bound " + std::to_string(bound);
                });
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

private:
    static constexpr std::uint64_t not_accepted = UINT64_MAX;

    [[nodiscard]] Target& target() noexcept { return static_cast<Target&>(*this); }

    // One pop, against the reference's; whether it returned a batch.
    bool pop_checked() {
        std::optional<batch> got;
        try {
            got = pop_subject();
        } catch (const bcl::error& e) {
            expect_same_state("after a pop() that failed with: ", e);
            return false;
        }
        compare_with_reference(got);
        return got.has_value();
    }

    std::optional<batch> pop_subject() {
        const auto got = m_subject->pop();
        if (!got) return std::nullopt;
        return batch(got->begin(), got->end());
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
            check(same_record((*got)[i], (*expected)[i]), [&] {
                return "batch " + std::to_string(m_batches.size()) +
                       " differs from the reference's at position " + std::to_string(i);
            });
        require(same_bits(m_subject->last_batch_cost(), m_reference->last_batch_cost()),
                "last_batch_cost() differs from the reference's");
        m_emitted += got->size();
        m_batches.push_back(*got);
        check(m_subject->stats().batches == m_batches.size(), [&] {
            return "stats().batches is " + std::to_string(m_subject->stats().batches) + " after " +
                   std::to_string(m_batches.size()) + " batches";
        });
    }

    bcl::options m_opt;
    std::unique_ptr<balancer_t> m_subject;
    std::unique_ptr<balancer_t> m_reference;
    std::vector<std::uint64_t> m_arrival; // per push attempt: arrival position, or not_accepted
    std::vector<batch> m_batches;         // the subject's batches
    std::uint64_t m_next_id = 0;
    std::uint64_t m_accepted = 0;
    std::size_t m_emitted = 0;
    std::size_t m_failed = 0;   // operations that failed (and changed nothing)
    std::size_t m_restores = 0; // saves restored into a new balancer
};

} // namespace bcl_fuzz
