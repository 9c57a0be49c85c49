#pragma once
// One rank's pass over a token-budget epoch in the keyed order, window by window: the epoch's
// order is bcl::keyed_order, read position by position, and each window of K steps of M
// micro-batches on every rank is planned (bcl::token_epoch_planner::plan_window) when the rank
// first asks for one of its micro-batches. A token window ends where the tokens say, so the
// windows are found by walking the order from the pass's start; the pass remembers where each
// window it walked starts (a few words a window), never the records. A pass covers the whole
// epoch, or what a checkpoint left of it (bcl::epoch_rest) laid out as an epoch of its own: a
// checkpoint holds the rest at its window's start, so that a pass over it walks nothing twice,
// and that rest less the steps trained in the window is how an epoch resumes at another world
// size. The samplers' keyed token mode runs this; the tables stay theirs, read through
// functions at each window.

#include <bcl/detail/config.hpp>

#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/keyed_epoch.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/token_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace bcl {

/// The shape of a token-budget epoch: every window K (`lookahead`) steps of M (`micro_batches`)
/// micro-batches of at most T tokens on each of R ranks (`budget`), planned with `options`; an
/// epoch that cannot fill every rank's micro-batches ends as `options` and `repeat_to_fill` say
/// (bcl::token_epoch_planner::plan_window).
struct token_epoch_shape {
    token_budget budget{};
    std::size_t micro_batches = 1;
    std::size_t lookahead = 8;
    token_plan_options options{};
    bool repeat_to_fill = false;
};

/// Where a pass stood after some of its micro-batches: the rest of the epoch at the start of the
/// window it was in, and the micro-batches of that window already taken. A pass at the same R
/// over `rest` hands out, from micro-batch `position` on, what the first pass would have.
struct token_pass_point {
    epoch_rest rest;
    std::size_t position = 0;
};

/// A pass of one rank over a keyed token-budget epoch (or its rest), planned window by window.
/// start() sets the pass up in O(1) (plus the rest's bitmap); micro_batch(i) plans the windows
/// up to i's that the pass has not walked yet, and i's window if it is not the last one planned,
/// each O(W log W) for a window of W records, and is O(size of the micro-batch) otherwise. The
/// plans are, window for window, bcl::token_epoch_planner::share's of the same epoch: for the
/// whole epoch, over bcl::keyed_order(N, seed, epoch) at positions 0..N-1 (0..N-1 itself
/// without shuffle). Each method that plans takes `tokens_of(index)`, the tokens of a dataset
/// index (below N), and `cost_of(index)`, its cost (read only when the pass was started
/// `with_costs`; else the default L + L^2/24576); the planner checks what they return.
///
/// Memory: one window's planner scratch and this rank's micro-batches of it, kept between
/// passes (a pass no larger allocates nothing but the starts of windows it walks further), two
/// words for each window walked, and the rest's bitmap. Not thread-safe.
template <class Index = std::uint64_t>
class keyed_token_pass {
    static_assert(std::is_integral_v<Index> && std::is_unsigned_v<Index>,
                  "dataset indices are unsigned integers");

public:
    /// Starts the pass of `epoch` over `rest` (of an epoch of rest.epoch_size() records) for
    /// rank `rank` of `shape`'s R ranks, its order keyed_order(N, seed, epoch) (or 0..N-1
    /// without `shuffle`); its digest is keyed_epoch_digest(inputs, epoch, R, rest). Nothing is
    /// planned yet. Throws bcl::error (prefixed with `who`) for a shape the planner refuses
    /// (check_token_budget, check_token_window, check_token_options) or a rank not below R,
    /// leaving the pass as it was. A rest with no records left is a pass of no micro-batches.
    /// O(the rest's bitmap).
    void start(std::uint64_t seed, std::uint64_t epoch, bool shuffle,
               const token_epoch_shape& shape, std::size_t rank, bool with_costs,
               std::uint64_t inputs, epoch_rest rest,
               std::string_view who = "bcl::keyed_token_pass") {
        check_token_budget(shape.budget, shape.lookahead, who);
        check_token_window(shape.budget, shape.micro_batches, shape.lookahead, who);
        check_token_options(shape.options, shape.budget, who);
        if (rank >= shape.budget.ranks)
            throw error(std::string(who) + ": rank " + std::to_string(rank) + " of " +
                        std::to_string(shape.budget.ranks) + " ranks: the rank must be below them");
        m_order = keyed_order(rest.epoch_size(), seed, epoch);
        m_shuffle = shuffle;
        m_epoch = epoch;
        m_shape = shape;
        m_rank = rank;
        m_with_costs = with_costs;
        m_digest = keyed_epoch_digest(inputs, epoch, shape.budget.ranks, rest);
        m_rest = std::move(rest);
        m_starts.assign(1, window_start{});
        m_end = m_rest.size() == 0 ? 0 : none; // a rest with nothing left ends at once
        m_window = none;
        m_planned = {};
    }

    /// The pass's digest (keyed_epoch_digest), known without planning. O(1).
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_digest; }
    /// The epoch's records this pass plans: the whole epoch, or what a checkpoint left. O(1).
    [[nodiscard]] const epoch_rest& rest() const noexcept { return m_rest; }
    /// The pass's epoch. O(1).
    [[nodiscard]] std::uint64_t epoch() const noexcept { return m_epoch; }
    /// The pass's shape. O(1).
    [[nodiscard]] const token_epoch_shape& shape() const noexcept { return m_shape; }
    /// What the windows planned so far promise, each counted once, when first planned. O(1).
    [[nodiscard]] const token_epoch_summary& planned() const noexcept { return m_planned; }
    /// Whether the pass has walked to its end (micro_batches() is then O(1)). O(1).
    [[nodiscard]] bool walked() const noexcept { return m_end != none; }

    /// Micro-batch i of this rank (its dataset indices, in the order's order), or none past the
    /// pass's end. The span stays valid until the next call. Throws what
    /// token_epoch_planner::plan_window throws (prefixed with `who`); a later call plans that
    /// window again.
    template <class TokensOf, class CostOf>
    [[nodiscard]] std::optional<std::span<const Index>>
    micro_batch(std::size_t i, TokensOf&& tokens_of, CostOf&& cost_of,
                std::string_view who = "bcl::keyed_token_pass") {
        const std::size_t w = window_of(i, tokens_of, cost_of, who);
        if (w == none) return std::nullopt;
        if (w != m_window) plan(w, tokens_of, cost_of, true, who);
        const std::size_t k = i - m_starts[w].micro;
        return std::span<const Index>(m_mine).subspan(m_offsets[k],
                                                      m_offsets[k + 1] - m_offsets[k]);
    }

    /// This rank's micro-batches in the pass, the same on every rank: the pass walked to its end
    /// once (each window it has not walked planned, and nothing of it kept but where it
    /// starts), then O(1). Throws what micro_batch() throws.
    template <class TokensOf, class CostOf>
    [[nodiscard]] std::size_t micro_batches(TokensOf&& tokens_of, CostOf&& cost_of,
                                            std::string_view who = "bcl::keyed_token_pass") {
        while (m_end == none) plan(m_starts.size() - 1, tokens_of, cost_of, false, who);
        return m_end;
    }

    /// Where the pass stands once this rank has taken `position` micro-batches: the rest at the
    /// start of the window of micro-batch `position` (what the windows before it took, taken),
    /// and `position` within that window; at the pass's end, nothing left. Any position will
    /// do. Throws bcl::error for a position past the pass's end, and what micro_batch() throws.
    /// O(the windows walked to reach it + the rest's span).
    template <class TokensOf, class CostOf>
    [[nodiscard]] token_pass_point point(std::size_t position, TokensOf&& tokens_of,
                                         CostOf&& cost_of,
                                         std::string_view who = "bcl::keyed_token_pass") {
        const std::size_t w = window_of(position, tokens_of, cost_of, who);
        if (w == none) return {ended(position, who), 0};
        return {m_rest.after(m_starts[w].first, {}), position - m_starts[w].micro};
    }

    /// The rest of the epoch once every rank of this pass has taken `position` micro-batches,
    /// which must end a step (at a step boundary every rank has taken as many): the records of
    /// the windows before the current one and those of the current one's steps before it, as
    /// the plan placed them (that window planned again if it is not the last one planned), taken
    /// besides what the pass's own rest had taken. Throws bcl::error for a position past the
    /// pass's end or within a step (a state there resumes at the same R only), and what
    /// micro_batch() throws. O(the window + the rest's span).
    template <class TokensOf, class CostOf>
    [[nodiscard]] epoch_rest rest_after(std::size_t position, TokensOf&& tokens_of,
                                        CostOf&& cost_of,
                                        std::string_view who = "bcl::keyed_token_pass") {
        const std::size_t w = window_of(position, tokens_of, cost_of, who);
        if (w == none) return ended(position, who);
        if (w != m_window) plan(w, tokens_of, cost_of, true, who);
        const std::size_t k = position - m_starts[w].micro;
        // k is below the window's micro-batches, m_steps' last entry: a step starts at or after.
        const auto step = std::lower_bound(m_steps.begin(), m_steps.end(), k);
        if (*step != k)
            throw error(std::string(who) + ": micro-batch " + std::to_string(position) +
                        " of the pass is within a step (its micro-batches " +
                        std::to_string(m_starts[w].micro + *(step - 1)) + " to " +
                        std::to_string(m_starts[w].micro + *step - 1) +
                        "): a state resumes at another number of ranks only from a step "
                        "boundary; save it after the optimizer step");
        const auto steps_taken = static_cast<std::size_t>(step - m_steps.begin());
        const std::uint64_t first = m_starts[w].first;
        const std::uint64_t left = m_rest.size();
        std::vector<std::uint64_t> also;
        const std::span<const micro_slot> slots = m_planner.slots();
        // Records at or past `left` are the padding's repeats of the rest's first records.
        for (std::size_t i = 0; i < m_window_records; ++i)
            if (slots[i].step < steps_taken && first + i < left) also.push_back(first + i);
        return m_rest.after(first, std::move(also));
    }

private:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    struct window_start {
        std::uint64_t first = 0; // the rest's record it starts at
        std::size_t micro = 0;   // this rank's micro-batches before it
    };

    // The window of micro-batch i, walking the windows not walked yet up to it; none past the
    // pass's end.
    template <class TokensOf, class CostOf>
    std::size_t window_of(std::size_t i, TokensOf& tokens_of, CostOf& cost_of,
                          std::string_view who) {
        while (m_end == none && i >= m_starts.back().micro)
            plan(m_starts.size() - 1, tokens_of, cost_of, true, who);
        if (m_end != none && i >= m_end) return none;
        const auto after = std::upper_bound(
            m_starts.begin(), m_starts.end(), i,
            [](std::size_t micro, const window_start& s) { return micro < s.micro; });
        return static_cast<std::size_t>(after - m_starts.begin()) - 1;
    }

    // The rest at the pass's end, for a position that is the end; bcl::error past it.
    epoch_rest ended(std::size_t position, std::string_view who) const {
        if (position > m_end)
            throw error(std::string(who) + ": position " + std::to_string(position) +
                        " is past the pass's " + std::to_string(m_end) + " micro-batches");
        return m_rest.after(m_rest.size(), {});
    }

    // Plans window w (walked up to it already), keeping this rank's micro-batches of it when
    // `keep`; records where the next window starts, or the pass's end.
    template <class TokensOf, class CostOf>
    void plan(std::size_t w, TokensOf& tokens_of, CostOf& cost_of, bool keep,
              std::string_view who) {
        const std::uint64_t n = m_rest.size();
        const window_start at = m_starts[w];
        m_window = none; // until the plan and this rank's micro-batches are both in
        const auto index_of = [this](std::uint64_t q) {
            const std::uint64_t p = m_rest.position(q);
            return m_shuffle ? m_order.at(p) : p;
        };
        // An epoch's end repeats the epoch's first records, whatever rest the pass plans, so that
        // a pass over point(p)'s rest ends as the pass it continues does.
        const auto repeat_of = [this](std::uint64_t k) { return m_shuffle ? m_order.at(k) : k; };
        const token_window tw = m_planner.plan_window(
            static_cast<std::size_t>(at.first), static_cast<std::size_t>(n), index_of, repeat_of,
            static_cast<std::size_t>(m_rest.epoch_size()), tokens_of, cost_of, m_with_costs,
            m_shape.budget, m_shape.micro_batches, m_shape.lookahead, m_shape.options, who,
            m_shape.repeat_to_fill);
        const token_plan_summary& s = tw.summary;
        if (w + 1 == m_starts.size() && m_end == none) { // first walked here
            m_planned.add(m_planner.slots().first(s.records), s);
            if (tw.ends(static_cast<std::size_t>(at.first), static_cast<std::size_t>(n))) {
                m_planned.repeated = tw.repeated;
                m_end = at.micro + s.micro_steps;
            } else {
                m_starts.push_back({at.first + s.records, at.micro + s.micro_steps});
            }
        }
        if (!keep) return;
        m_mine.clear();
        m_offsets.assign(1, 0);
        m_steps.assign(1, 0);
        const std::span<const std::uint64_t> indices = m_planner.indices();
        m_planner.keep_rank(
            s, m_rank, [&](std::size_t i) { return indices[i]; }, m_mine, m_offsets, m_steps);
        m_window_records = s.records;
        m_window = w;
    }

    keyed_order m_order{0, 0, 0};
    bool m_shuffle = true;
    std::uint64_t m_epoch = 0;
    token_epoch_shape m_shape{};
    std::size_t m_rank = 0;
    bool m_with_costs = false;
    std::uint64_t m_digest = 0;
    epoch_rest m_rest; // the records this pass plans: all, or what a checkpoint left
    token_epoch_planner m_planner;
    std::vector<window_start> m_starts; // the windows walked, in order
    std::size_t m_end = none;           // this rank's micro-batches in the pass, once walked
    std::vector<Index> m_mine;          // this rank's micro-batches of window m_window
    std::vector<std::size_t> m_offsets; // where each of them starts in m_mine (and the end)
    std::vector<std::size_t> m_steps;   // the window's steps: the first micro-batch of each
    std::size_t m_window_records = 0;   // the records of window m_window
    std::size_t m_window = none;        // the window m_mine holds; the planner's slots are its
    token_epoch_summary m_planned{};    // what the windows walked promise
};

} // namespace bcl
