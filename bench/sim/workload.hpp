#pragma once
// Record lengths: distribution specs and their parsing, workload files, per-rank record sources.

#include "input.hpp"
#include "length_file.hpp"
#include "random.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// Length distributions and their `name:key=value,...` specs.
// ---------------------------------------------------------------------------------------------

/// `lognormal:mu=6,sigma=1`: L = ceil(exp(mu + sigma * Z)).
struct lognormal_spec {
    double mu = 6.0;
    double sigma = 1.0;
};
/// `pareto:xm=100,alpha=1.5`: L = ceil(xm * U^(-1/alpha)), U uniform in (0, 1].
struct pareto_spec {
    double xm = 100.0;
    double alpha = 1.5;
};
/// `bimodal:short=512,long=4096,p=0.25,sigma=0.3`: with probability p a "long" record, else a
/// "short" one; each mode is lognormal with the given median and log-space deviation sigma.
struct bimodal_spec {
    double short_median = 512.0;
    double long_median = 4096.0;
    double p_long = 0.25;
    double sigma = 0.3;
};
/// `uniform:lo=1,hi=4096`: L uniform over the integers lo..hi (both included).
struct uniform_spec {
    double lo = 1.0;
    double hi = 4096.0;
};
/// `file:PATH`: one length per line.
struct file_spec {
    std::string path;
};

using dist_spec = std::variant<lognormal_spec, pareto_spec, bimodal_spec, uniform_spec, file_spec>;

[[nodiscard]] inline std::string_view dist_name(const dist_spec& d) noexcept {
    constexpr std::array<std::string_view, 5> names{"lognormal", "pareto", "bimodal", "uniform",
                                                    "file"};
    return names[d.index()];
}

/// Parses a --dist value: `lognormal[:mu=..,sigma=..]`, `pareto[:xm=..,alpha=..]`,
/// `bimodal[:short=..,long=..,p=..,sigma=..]`, `uniform[:lo=..,hi=..]` or `file:PATH`. Missing
/// parameters keep the defaults shown above. Throws input_error naming what is wrong.
[[nodiscard]] inline dist_spec parse_dist(std::string_view text) {
    const std::size_t colon = text.find(':');
    const std::string_view name = text.substr(0, colon);
    const std::string_view rest =
        colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
    const std::string what = fmt::format("--dist {}", text);
    using detail::param;
    using detail::require;
    if (name == "file") {
        if (rest.empty()) throw input_error(fmt::format("{}: expected file:PATH", what));
        return file_spec{std::string(rest)};
    }
    if (name == "lognormal") {
        lognormal_spec d;
        const std::array ps{param{"mu", &d.mu}, param{"sigma", &d.sigma}};
        detail::parse_params(what, rest, ps);
        require(d.sigma >= 0, what, "sigma must be >= 0");
        return d;
    }
    if (name == "pareto") {
        pareto_spec d;
        const std::array ps{param{"xm", &d.xm}, param{"alpha", &d.alpha}};
        detail::parse_params(what, rest, ps);
        require(d.xm > 0, what, "xm must be > 0");
        require(d.alpha > 0, what, "alpha must be > 0");
        return d;
    }
    if (name == "bimodal") {
        bimodal_spec d;
        const std::array ps{param{"short", &d.short_median}, param{"long", &d.long_median},
                            param{"p", &d.p_long}, param{"sigma", &d.sigma}};
        detail::parse_params(what, rest, ps);
        require(d.short_median > 0 && d.long_median > 0, what, "short and long must be > 0");
        require(d.p_long >= 0 && d.p_long <= 1, what, "p must be in [0, 1]");
        require(d.sigma >= 0, what, "sigma must be >= 0");
        return d;
    }
    if (name == "uniform") {
        uniform_spec d;
        const std::array ps{param{"lo", &d.lo}, param{"hi", &d.hi}};
        detail::parse_params(what, rest, ps);
        require(d.lo >= 0 && d.lo == std::floor(d.lo) && d.hi == std::floor(d.hi), what,
                "lo and hi must be integers >= 0");
        require(d.lo <= d.hi, what, "lo must be <= hi");
        require(d.hi < 0x1.0p52, what, "hi must be below 2^52");
        return d;
    }
    throw input_error(fmt::format(
        "--dist {}: unknown distribution '{}' (expected lognormal, pareto, bimodal, uniform or "
        "file:PATH)",
        text, name));
}

/// The spec with every parameter spelled out, e.g. `lognormal:mu=6,sigma=1`.
[[nodiscard]] inline std::string describe(const dist_spec& d) {
    struct visitor {
        std::string operator()(const lognormal_spec& s) const {
            return fmt::format("lognormal:mu={},sigma={}", s.mu, s.sigma);
        }
        std::string operator()(const pareto_spec& s) const {
            return fmt::format("pareto:xm={},alpha={}", s.xm, s.alpha);
        }
        std::string operator()(const bimodal_spec& s) const {
            return fmt::format("bimodal:short={},long={},p={},sigma={}", s.short_median,
                               s.long_median, s.p_long, s.sigma);
        }
        std::string operator()(const uniform_spec& s) const {
            return fmt::format("uniform:lo={},hi={}", s.lo, s.hi);
        }
        std::string operator()(const file_spec& s) const { return "file:" + s.path; }
    };
    return std::visit(visitor{}, d);
}

/// A record's length from four words of its stream. Lengths are whole numbers (token counts), so
/// a last-bit difference in a platform's exp/log almost never changes a simulated length.
[[nodiscard]] inline double draw_length(const dist_spec& d, std::uint64_t key,
                                        std::uint64_t index) {
    const std::uint64_t w0 = stream_word(key, 4 * index);
    const std::uint64_t w1 = stream_word(key, 4 * index + 1);
    const std::uint64_t w2 = stream_word(key, 4 * index + 2);
    struct visitor {
        std::uint64_t w0, w1, w2;
        double operator()(const lognormal_spec& s) const {
            return std::ceil(std::exp(s.mu + s.sigma * standard_normal(w0, w1)));
        }
        double operator()(const pareto_spec& s) const {
            return std::ceil(s.xm * std::pow(unit_interval_open0(w0), -1.0 / s.alpha));
        }
        double operator()(const bimodal_spec& s) const {
            const double median = unit_interval(w2) < s.p_long ? s.long_median : s.short_median;
            return std::ceil(median * std::exp(s.sigma * standard_normal(w0, w1)));
        }
        double operator()(const uniform_spec& s) const {
            const double span = s.hi - s.lo + 1.0;
            return std::min(s.hi, s.lo + std::floor(unit_interval(w0) * span));
        }
        double operator()(const file_spec&) const { return 0.0; }
    };
    return std::visit(visitor{w0, w1, w2}, d);
}

/// The largest length a workload file may hold: 2^31 tokens.
inline constexpr double max_token_count = static_cast<double>(bcl_tools::max_file_length);

/// Reads a workload file with the tools' one reader (bench/common/length_file.hpp): one token
/// count per line, a whole number from 0 to max_token_count. Throws input_error naming the file,
/// the line and the value for a missing file, a line that is not a number, a negative, fractional
/// or too large length, or a file without any length.
[[nodiscard]] inline std::vector<double> load_lengths(const std::string& path) {
    std::vector<std::uint64_t> read;
    try {
        read = bcl_tools::read_length_file(path);
    } catch (const bcl_tools::length_file_error& e) {
        throw input_error(e.what());
    }
    if (read.size() >= std::numeric_limits<std::uint32_t>::max())
        throw input_error(fmt::format("{}: too many lengths ({})", path, read.size()));
    return {read.begin(), read.end()};
}

// ---------------------------------------------------------------------------------------------
// Record sources: the stream each rank reads, random access by (rank, index).
// ---------------------------------------------------------------------------------------------

/// Where records come from. Rank r's index-th record is also global record `index * R + r`: the
/// position in the sampler order before it is dealt to ranks (the order the global baselines see).
class record_source {
public:
    virtual ~record_source() = default;
    /// Length of the index-th record rank `rank` reads.
    [[nodiscard]] virtual double length(std::size_t rank, std::uint64_t index) = 0;
    /// Records in one epoch of the global order, if the stream has epochs.
    [[nodiscard]] virtual std::optional<std::uint64_t> global_epoch() const { return {}; }
    /// Size of the underlying data set, if it is finite.
    [[nodiscard]] virtual std::optional<std::uint64_t> dataset_size() const { return {}; }
};

/// A synthetic distribution: every rank draws its own independent stream.
class synthetic_source final : public record_source {
public:
    synthetic_source(dist_spec dist, std::size_t ranks, std::uint64_t seed)
        : m_dist(std::move(dist)) {
        m_keys.reserve(ranks);
        for (std::size_t r = 0; r < ranks; ++r)
            m_keys.push_back(stream_key(seed, domain::synthetic, r));
    }
    [[nodiscard]] double length(std::size_t rank, std::uint64_t index) override {
        return draw_length(m_dist, m_keys[rank], index);
    }

private:
    dist_spec m_dist;
    std::vector<std::uint64_t> m_keys;
};

/// A workload file read the way PyTorch's DistributedSampler reads a data set: each epoch is a
/// seeded shuffle, padded by repeating its start to a multiple of R, and dealt strided (rank r
/// takes positions r, r+R, ...). Epochs follow each other for as long as the run needs. The
/// permutations are regenerated on demand and kept in a small direct-mapped cache, so memory
/// stays O(cache * N) however long the run.
class file_source final : public record_source {
public:
    file_source(std::shared_ptr<const std::vector<double>> lengths, std::size_t ranks,
                std::uint64_t seed, std::size_t cache_epochs = 8)
        : m_lengths(std::move(lengths)), m_ranks(ranks), m_seed(seed),
          m_per_rank((m_lengths->size() + ranks - 1) / ranks),
          m_slots(std::max<std::size_t>(cache_epochs, 1)) {}

    [[nodiscard]] double length(std::size_t rank, std::uint64_t index) override {
        const std::uint64_t epoch = index / m_per_rank;
        const std::uint64_t position = (index % m_per_rank) * m_ranks + rank; // in padded epoch
        return (*m_lengths)[permutation(epoch)[position % m_lengths->size()]];
    }
    [[nodiscard]] std::optional<std::uint64_t> global_epoch() const override {
        return m_per_rank * m_ranks;
    }
    [[nodiscard]] std::optional<std::uint64_t> dataset_size() const override {
        return m_lengths->size();
    }

private:
    struct slot {
        std::uint64_t epoch = 0;
        bool valid = false;
        std::vector<std::uint32_t> order;
    };

    const std::vector<std::uint32_t>& permutation(std::uint64_t epoch) {
        slot& s = m_slots[epoch % m_slots.size()];
        if (!s.valid || s.epoch != epoch) {
            s.order.resize(m_lengths->size());
            for (std::size_t i = 0; i < s.order.size(); ++i)
                s.order[i] = static_cast<std::uint32_t>(i);
            splitmix rng(stream_key(m_seed, domain::file, epoch));
            shuffle(std::span<std::uint32_t>(s.order), rng);
            s.epoch = epoch;
            s.valid = true;
        }
        return s.order;
    }

    std::shared_ptr<const std::vector<double>> m_lengths;
    std::size_t m_ranks;
    std::uint64_t m_seed;
    std::uint64_t m_per_rank; // records per rank per epoch, ceil(N / R)
    std::vector<slot> m_slots;
};

/// Explicit per-rank streams (for tests and hand-made cases). Reading past a stream throws.
class table_source final : public record_source {
public:
    explicit table_source(std::vector<std::vector<double>> per_rank)
        : m_per_rank(std::move(per_rank)) {}
    [[nodiscard]] double length(std::size_t rank, std::uint64_t index) override {
        return m_per_rank.at(rank).at(static_cast<std::size_t>(index));
    }

private:
    std::vector<std::vector<double>> m_per_rank;
};

} // namespace bcl_sim
