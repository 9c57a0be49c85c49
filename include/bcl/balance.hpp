#pragma once
// bcl::balance: the range adaptor. Wraps any input range of records into a range of batches.

#include <bcl/detail/config.hpp>

#include <bcl/balancer.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/options.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>

#include <cstddef>
#include <iterator>
#include <optional>
#include <ranges>
#include <span>
#include <utility>

namespace bcl {

/// The range returned by bcl::balance: an input range of batches (std::span<Record>, each valid
/// until the iterator is incremented). Records are moved out of the underlying range as they are
/// pulled, so iterate it once.
///
/// If the upstream range or the estimator throws, the exception propagates out of the loop and
/// nothing is lost: the record that failed is still in the underlying range (at position
/// `balancer().stats().records_in`) and everything pulled before it is in balancer(); call
/// `balancer().finish()` and pop() to drain it. After any exception the iterator equals end():
/// it never shows a batch twice.
///
/// The underlying iterator need not be default-constructible (a sampler's iterator, or
/// std::views::istream's); it is created by begin().
template <std::ranges::input_range View, class Estimator, partitioner Partitioner>
requires std::ranges::view<View> && record<std::ranges::range_value_t<View>> &&
    cost_estimator<Estimator, std::ranges::range_value_t<View>>
class balance_view
    : public std::ranges::view_interface<balance_view<View, Estimator, Partitioner>> {
public:
    using record_type = std::ranges::range_value_t<View>;
    using balancer_type = bcl::balancer<record_type, Estimator, Partitioner>;
    using batch_type = typename balancer_type::batch_type;

    class iterator {
    public:
        using value_type = batch_type;
        using difference_type = std::ptrdiff_t;

        iterator() = default;
        [[nodiscard]] batch_type operator*() const { return *m_view->m_batch; }
        iterator& operator++() {
            m_view->advance();
            return *this;
        }
        void operator++(int) { ++*this; }
        [[nodiscard]] friend bool operator==(const iterator& it, std::default_sentinel_t /*end*/) {
            return it.done();
        }

    private:
        friend balance_view;
        explicit iterator(balance_view* view) : m_view(view) {}
        [[nodiscard]] bool done() const { return !m_view->m_batch.has_value(); }
        balance_view* m_view = nullptr;
    };

    /// Throws bcl::error for invalid options.
    balance_view(View base, Estimator estimator, options opt, Partitioner partitioner = {})
        : m_base(std::move(base)), m_balancer(std::move(estimator), opt, std::move(partitioner)) {}

    /// Pulls records until the first batch is ready. Call once: this is an input range.
    [[nodiscard]] iterator begin() {
        if (!m_started) {
            m_started = true;
            m_current.emplace(std::ranges::begin(m_base));
            advance();
        }
        return iterator{this};
    }
    [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

    /// The balancer inside: its statistics, and the records it holds after an exception.
    [[nodiscard]] balancer_type& balancer() noexcept { return m_balancer; }
    [[nodiscard]] const balancer_type& balancer() const noexcept { return m_balancer; }

private:
    // Pushes upstream records until a batch is ready or everything is drained.
    void advance() {
        m_batch.reset(); // the batch shown so far is gone, even if what follows throws
        for (;;) {
            m_batch = m_balancer.pop();
            if (m_batch) return;
            if (m_balancer.finished()) return;
            if (*m_current == std::ranges::end(m_base)) {
                m_balancer.finish();
                continue;
            }
            m_balancer.push(std::ranges::iter_move(*m_current));
            ++*m_current;
        }
    }

    View m_base;
    std::optional<std::ranges::iterator_t<View>> m_current; // set by begin()
    balancer_type m_balancer;
    std::optional<batch_type> m_batch;
    bool m_started = false;
};

/// Balances any input range of records into batches of exactly options.batch_size records with
/// balanced estimated cost. Pass an owning range with std::move (its records are moved out), or
/// an lvalue range (viewed, its records moved out in place).
///
///     for (auto&& batch : bcl::balance(std::move(samples), cost, {.batch_size = 32}))
///         train_step(batch);
///
/// Records at hand before the loop (an epoch) can give every round their own mean cost to aim at,
/// rather than a running estimate that differs from rank to rank early on: set
/// `opt.mean_cost = bcl::stream_mean_cost(samples, cost, opt.cap)` first (docs/alignment.md).
///
/// Throws bcl::error for invalid options; see balance_view for errors while iterating.
template <std::ranges::viewable_range Range, class Estimator,
          partitioner Partitioner = lpt_swap_partitioner>
requires std::ranges::input_range<Range> && record<std::ranges::range_value_t<Range>> &&
    cost_estimator<Estimator, std::ranges::range_value_t<Range>>
[[nodiscard]] auto balance(Range&& range, Estimator estimator, options opt,
                           Partitioner partitioner = {}) {
    return balance_view<std::views::all_t<Range>, Estimator, Partitioner>(
        std::views::all(std::forward<Range>(range)), std::move(estimator), opt,
        std::move(partitioner));
}

} // namespace bcl
