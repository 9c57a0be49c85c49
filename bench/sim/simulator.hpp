#pragma once
// The engine of bcl-sim, the multi-rank simulator: record streams, the cost model, the baseline
// policies, the bcl policies (which go through the library itself, never a re-implementation),
// and the metrics. Header-only so that tests/sim.test.cpp can drive it directly; the command-line
// front end (flags, table/JSON/CSV output) is bcl_sim.cpp.
//
// The model: R ranks run synchronous data-parallel steps. In every step each rank processes one
// batch; the step lasts as long as its slowest rank. A policy decides which records make up each
// rank's batch in each step; a rank's time in a step is the sum of its records' true costs.

#include <algorithm>
#include <array>
#include <bcl/balancer.hpp>
#include <bcl/error.hpp>
#include <bcl/estimators.hpp>
#include <bcl/lpt_swap_partitioner.hpp>
#include <bcl/options.hpp>
#include <bcl/partitioner.hpp>
#include <bcl/quantile_sketch.hpp>
#include <bcl/record_model.hpp>
#include <bcl/statistics.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace bcl_sim {

/// Bad input to the simulator: a flag value, a distribution or cost spec, a workload file. The
/// command-line tool reports it and exits with code 2.
class input_error : public std::runtime_error {
public:
    explicit input_error(const std::string& what) : std::runtime_error(what) {}
};

// ---------------------------------------------------------------------------------------------
// Random numbers: fully specified, so a seed gives the same run on every platform.
// ---------------------------------------------------------------------------------------------

inline constexpr std::uint64_t golden_gamma = 0x9e3779b97f4a7c15ULL;

/// The SplitMix64 output function (Steele, Lea, Flood 2014): a bijection on 64-bit words.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// Domains keep the streams of different purposes apart even under the same seed.
enum class domain : std::uint64_t {
    synthetic = 1, ///< per-rank synthetic length streams
    file = 2,      ///< per-epoch shuffles of a workload file
    pilot = 3,     ///< the sample that estimates a synthetic distribution's p99
    bcl = 4,       ///< per-rank seeds of bcl balancers
    oracle = 5,    ///< per-window step order of the oracle
};

/// Key of stream `index` of `dom` under `seed`. For a fixed seed and domain, distinct indices give
/// distinct keys (mix64 is a bijection).
[[nodiscard]] constexpr std::uint64_t stream_key(std::uint64_t seed, domain dom,
                                                 std::uint64_t index) noexcept {
    return mix64(mix64(seed ^ mix64(static_cast<std::uint64_t>(dom))) + index * golden_gamma);
}

/// Word `counter` of the stream keyed `key`: the counter-th output of SplitMix64 started at
/// `key`. Random access, so rank r's i-th record is computed without generating the ones before.
[[nodiscard]] constexpr std::uint64_t stream_word(std::uint64_t key,
                                                  std::uint64_t counter) noexcept {
    return mix64(key + (counter + 1) * golden_gamma);
}

/// Uniform in [0, 1) from the top 53 bits.
[[nodiscard]] constexpr double unit_interval(std::uint64_t w) noexcept {
    return static_cast<double>(w >> 11) * 0x1.0p-53;
}

/// Uniform in (0, 1] from the top 53 bits (safe to take the log of).
[[nodiscard]] constexpr double unit_interval_open0(std::uint64_t w) noexcept {
    return static_cast<double>((w >> 11) + 1) * 0x1.0p-53;
}

/// A sequential SplitMix64 generator for shuffles.
class splitmix {
public:
    explicit constexpr splitmix(std::uint64_t key) noexcept : m_state(key) {}
    constexpr std::uint64_t next() noexcept { return mix64(m_state += golden_gamma); }
    /// Uniform in [0, bound) for bound >= 1, by rejection so no value is favoured.
    constexpr std::uint64_t below(std::uint64_t bound) noexcept {
        const std::uint64_t limit = (std::uint64_t{0} - bound) % bound; // 2^64 mod bound
        for (;;) {
            const std::uint64_t x = next();
            if (x >= limit)
                return x % bound;
        }
    }

private:
    std::uint64_t m_state;
};

/// Fisher-Yates shuffle driven by `rng`.
template <class T>
void shuffle(std::span<T> items, splitmix& rng) noexcept {
    for (std::size_t i = items.size(); i > 1; --i) {
        const auto j = static_cast<std::size_t>(rng.below(i));
        std::swap(items[i - 1], items[j]);
    }
}

/// Standard normal by Box-Muller from two words.
[[nodiscard]] inline double standard_normal(std::uint64_t w1, std::uint64_t w2) noexcept {
    constexpr double two_pi = 6.283185307179586476925286766559;
    return std::sqrt(-2.0 * std::log(unit_interval_open0(w1))) *
           std::cos(two_pi * unit_interval(w2));
}

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

namespace detail {

[[nodiscard]] inline std::string_view trim(std::string_view s) noexcept {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!s.empty() && space(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && space(s.back()))
        s.remove_suffix(1);
    return s;
}

/// Parses all of `text` as a finite double; nothing else is accepted.
[[nodiscard]] inline std::optional<double> parse_number(std::string_view text) noexcept {
    double value = 0.0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc{} || ptr != end || !std::isfinite(value))
        return std::nullopt;
    return value;
}

struct param {
    std::string_view key;
    double* value;
};

/// Parses `key=value,key=value` into the named fields; unknown keys and bad numbers throw.
inline void parse_params(std::string_view what, std::string_view list,
                         std::span<const param> params) {
    std::string expected;
    for (const param& p : params) {
        if (!expected.empty())
            expected += ", ";
        expected += p.key;
    }
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        const std::size_t eq = item.find('=');
        if (eq == std::string_view::npos)
            throw input_error(fmt::format("{}: '{}' is not of the form key=value (keys: {})", what,
                                          item, expected));
        const std::string_view key = trim(item.substr(0, eq));
        const std::string_view text = trim(item.substr(eq + 1));
        const auto it = std::find_if(params.begin(), params.end(),
                                     [&](const param& p) { return p.key == key; });
        if (it == params.end())
            throw input_error(
                fmt::format("{}: unknown parameter '{}' (expected {})", what, key, expected));
        const std::optional<double> value = parse_number(text);
        if (!value)
            throw input_error(
                fmt::format("{}: parameter {} = '{}' is not a finite number", what, key, text));
        *it->value = *value;
    }
}

inline void require(bool ok, std::string_view what, std::string_view rule) {
    if (!ok)
        throw input_error(fmt::format("{}: {}", what, rule));
}

} // namespace detail

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
        if (rest.empty())
            throw input_error(fmt::format("{}: expected file:PATH", what));
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
inline constexpr double max_token_count = 2147483648.0;

/// Reads a workload file: one token count per line (blank lines are skipped), a whole number from
/// 0 to max_token_count. Throws input_error naming the file, the line and the value for a missing
/// file, a line that is not a number, a negative, fractional or too large length, or a file
/// without any length: a fraction or a runaway exponent in a file is reported, not simulated.
[[nodiscard]] inline std::vector<double> load_lengths(const std::string& path) {
    std::ifstream in(path);
    if (!in)
        throw input_error(fmt::format("--dist file:{}: cannot open the file", path));
    std::vector<double> lengths;
    std::string line;
    std::size_t number = 0;
    while (std::getline(in, line)) {
        ++number;
        const std::string_view text = detail::trim(line);
        if (text.empty())
            continue;
        const std::optional<double> value = detail::parse_number(text);
        if (!value)
            throw input_error(fmt::format("{}:{}: '{}' is not a number (expected one length per "
                                          "line)",
                                          path, number, text));
        if (*value < 0)
            throw input_error(fmt::format("{}:{}: negative length {} (lengths must be >= 0)", path,
                                          number, text));
        if (*value != std::floor(*value) || *value > max_token_count)
            throw input_error(fmt::format("{}:{}: length {} is {}; a length is a token count, a "
                                          "whole number from 0 to 2^31 = {:.0f}",
                                          path, number, text,
                                          *value > max_token_count ? "above 2^31"
                                                                   : "not a whole number",
                                          max_token_count));
        lengths.push_back(*value + 0.0); // + 0.0 turns -0 into 0
    }
    if (in.bad())
        throw input_error(fmt::format("--dist file:{}: read error", path));
    if (lengths.empty())
        throw input_error(fmt::format("{}: no lengths in the file", path));
    if (lengths.size() >= std::numeric_limits<std::uint32_t>::max())
        throw input_error(fmt::format("{}: too many lengths ({})", path, lengths.size()));
    return lengths;
}

/// Arithmetic mean of `values` (0 for none).
[[nodiscard]] inline double mean_of(const std::vector<double>& values) noexcept {
    double sum = 0.0;
    for (const double x : values)
        sum += x;
    return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

/// Nearest-rank quantile q in (0, 1] of `values` (copied; values need not be sorted).
[[nodiscard]] inline double nearest_rank(std::vector<double> values, double q) {
    if (values.empty())
        return 0.0;
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
    rank = std::clamp<std::size_t>(rank, 1, values.size());
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                     values.end());
    return values[rank - 1];
}

// ---------------------------------------------------------------------------------------------
// The cost model: `affine:a=..,b=..,c=..` is a + b*L + c*L^2, through bcl's own estimator.
// ---------------------------------------------------------------------------------------------

using cost_model = bcl::affine_quadratic_cost<>;

/// The default: L + L^2/24576, a FLOPs proxy for a 7B transformer (linear layers plus attention).
[[nodiscard]] inline cost_model default_cost() noexcept {
    return {0.0, 1.0, 1.0 / 24576.0, {}};
}

/// Parses a --cost value `affine[:a=..,b=..,c=..]`; missing coefficients keep the default's.
/// Coefficients must be >= 0 so that cost grows with length (length-sorting baselines rely on it).
[[nodiscard]] inline cost_model parse_cost(std::string_view text) {
    const std::size_t colon = text.find(':');
    const std::string_view name = text.substr(0, colon);
    const std::string what = fmt::format("--cost {}", text);
    if (name != "affine")
        throw input_error(fmt::format(
            "{}: unknown cost model '{}' (expected affine:a=..,b=..,c=..)", what, name));
    cost_model m = default_cost();
    const std::array ps{detail::param{"a", &m.a}, detail::param{"b", &m.b},
                        detail::param{"c", &m.c}};
    detail::parse_params(
        what, colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1), ps);
    detail::require(m.a >= 0 && m.b >= 0 && m.c >= 0, what, "a, b and c must be >= 0");
    return m;
}

[[nodiscard]] inline std::string describe(const cost_model& m) {
    return fmt::format("affine:a={},b={},c={}", m.a, m.b, m.c);
}

// ---------------------------------------------------------------------------------------------
// The outlier cap: `--cap none|p<q>|<tokens>` and what truncating a record to it means.
// ---------------------------------------------------------------------------------------------

/// The cap as given on the command line. A fixed cap is a length in tokens (the unit of the
/// workload files); bcl's own cap is in cost units, so it becomes cost(tokens) (see bcl_cap()).
/// Cost grows with length (a, b, c >= 0), so capping a record's cost at cost(T) and capping its
/// length at T are the same thing.
struct cap_spec {
    bcl::cap_kind kind = bcl::cap_kind::none;
    double tokens = 0.0;    ///< kind == fixed: the cap as a length, > 0
    double quantile = 0.99; ///< kind == quantile: q in (0, 1); `p99.5` is 0.995
};

/// Parses a --cap value: `none`, `p<percent>` (p99, p99.5, p90: the streaming quantile of each
/// rank's costs) or a plain number (a fixed cap in tokens). Throws input_error otherwise.
[[nodiscard]] inline cap_spec parse_cap(std::string_view text) {
    const std::string_view t = detail::trim(text);
    if (t == "none")
        return {};
    const auto bad = [&](std::string_view why) {
        return input_error(fmt::format("--cap {}: {} (expected none, p<percent> such as p99 or "
                                       "p99.5, or a length in tokens such as 32768)",
                                       text, why));
    };
    if (!t.empty() && (t.front() == 'p' || t.front() == 'P')) {
        const std::optional<double> percent = detail::parse_number(t.substr(1));
        if (!percent)
            throw bad("the percentile is not a number");
        if (!(*percent > 0.0 && *percent < 100.0))
            throw bad("the percentile must be above 0 and below 100");
        return {bcl::cap_kind::quantile, 0.0, *percent / 100.0};
    }
    const std::optional<double> tokens = detail::parse_number(t);
    if (!tokens)
        throw bad("not a cap");
    if (!(*tokens > 0.0))
        throw bad("a fixed cap must be a length > 0");
    return {bcl::cap_kind::fixed, *tokens, 0.99};
}

/// `none`, `p99.5` or the fixed length, as parse_cap reads it back.
[[nodiscard]] inline std::string describe(const cap_spec& c) {
    switch (c.kind) {
    case bcl::cap_kind::fixed:
        return fmt::format("{}", c.tokens);
    case bcl::cap_kind::quantile:
        return fmt::format("p{}", c.quantile * 100.0);
    default:
        return "none";
    }
}

[[nodiscard]] inline std::string_view describe(bcl::cap_action a) noexcept {
    return a == bcl::cap_action::truncate ? "truncate" : "clip";
}

/// Parses a --cap-action value: `clip` or `truncate`.
[[nodiscard]] inline bcl::cap_action parse_cap_action(std::string_view text) {
    if (text == "clip")
        return bcl::cap_action::clip;
    if (text == "truncate")
        return bcl::cap_action::truncate;
    throw input_error(
        fmt::format("--cap-action {}: unknown action (expected clip or truncate)", text));
}

/// The bcl cap for a --cap and --cap-action under a cost model: a fixed cap of T tokens is the
/// cost cap cost(T); a quantile keeps bcl's default warm-up, ceil(10 / (1 - q)) records. Throws
/// input_error if a fixed cap costs nothing (bcl needs a cap > 0).
[[nodiscard]] inline bcl::cap_options bcl_cap(const cap_spec& spec, bcl::cap_action action,
                                              const cost_model& cost) {
    bcl::cap_options cap;
    cap.kind = spec.kind;
    cap.action = action;
    if (spec.kind == bcl::cap_kind::fixed) {
        cap.value = cost(spec.tokens);
        if (!(cap.value > 0.0) || !std::isfinite(cap.value))
            throw input_error(fmt::format("--cap {}: the cost of {} tokens is {}; a fixed cap "
                                          "must cost more than 0",
                                          describe(spec), spec.tokens, cap.value));
    } else if (spec.kind == bcl::cap_kind::quantile) {
        cap.quantile = spec.quantile;
    }
    return cap;
}

/// The length a record of `length` tokens is truncated to under the cost cap `cap`: the largest
/// whole number of tokens whose cost a + b*L + c*L^2 is at most the cap, and never more than the
/// record had. It starts from the positive root of a + b*L + c*L^2 = cap, computed as
/// 2(cap - a) / (b + sqrt(b^2 + 4c(cap - a))), which is (cap - a) / b when c == 0 and does not
/// cancel when c is tiny, then rounds down to whole tokens (checking the neighbours, so a
/// rounding error in the root never leaves the cost above the cap). Returns 0 when even an empty
/// record costs more than the cap (a > cap), and `length` unchanged when the cost does not grow
/// with length (b == c == 0) or the record is within the cap already.
[[nodiscard]] inline double truncated_length(const cost_model& m, double length, double cap) {
    if (m(length) <= cap)
        return length;
    if (m.b == 0.0 && m.c == 0.0)
        return length;
    if (m.a > cap)
        return 0.0;
    const double room = cap - m.a;
    const double root = 2.0 * room / (m.b + std::sqrt(m.b * m.b + 4.0 * m.c * room));
    double whole = std::floor(root);
    while (whole > 0.0 && m(whole) > cap)
        whole -= 1.0;
    while (whole + 1.0 < length && m(whole + 1.0) <= cap)
        whole += 1.0;
    return std::min(whole, length);
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

/// The truncating cap applied to the baselines' records, so that every policy runs on the same
/// truncated workload. Each rank's stream is capped the way that rank's bcl::balancer caps it:
/// records are taken in the rank's arrival order (index 0, 1, ...); a fixed cap is the cost
/// cap; a quantile cap is read from a bcl::quantile_sketch of the rank's uncapped costs, not
/// before the warm-up (bcl::cap_warmup) and then re-read when the warm-up ends and every 64
/// records, exactly the rule of bcl::balancer's current_cap() (include/bcl/balancer.hpp). A record
/// whose cost is above the cap is truncated with truncated_length(). So a bcl policy and a
/// baseline truncate the same records to the same lengths, which tests/sim.test.cpp checks.
///
/// Every baseline reads each rank's stream in increasing index order, each index once; a read
/// that jumps ahead processes the records in between (the sketch needs them), a read of an
/// earlier index than the last one is a logic error.
class stream_cap {
public:
    struct record {
        double length = 0.0; ///< after truncation
        bool capped = false; ///< the record's cost was above the cap (so it was truncated)
    };

    /// `cap` must be a truncating cap of kind fixed or quantile, in cost units (see bcl_cap()).
    stream_cap(record_source* source, cost_model cost, bcl::cap_options cap, std::size_t ranks)
        : m_source(source), m_cost(cost), m_cap(cap), m_state(ranks) {
        if (m_cap.kind == bcl::cap_kind::quantile)
            m_sketches.resize(ranks);
    }

    /// Rank `rank`'s index-th record, capped.
    [[nodiscard]] record read(std::size_t rank, std::uint64_t index) {
        rank_state& st = m_state[rank];
        if (index + 1 < st.next)
            throw std::logic_error(fmt::format("stream_cap: rank {} read record {} after record {}",
                                               rank, index, st.next - 1));
        while (st.next <= index)
            st.last = advance(rank, st);
        return st.last;
    }

private:
    struct rank_state {
        std::uint64_t next = 0; // next index to process
        double cap = HUGE_VAL;  // quantile cap last read from the sketch
        record last;            // the record at index next - 1 (once next > 0)
    };

    // As bcl::balancer::current_cap(): the cap for the record about to be added.
    double current_cap(std::size_t rank, rank_state& st) {
        if (m_cap.kind == bcl::cap_kind::fixed)
            return m_cap.value;
        const bcl::quantile_sketch& sketch = m_sketches[rank];
        const std::uint64_t seen = sketch.count();
        const std::size_t warmup = bcl::cap_warmup(m_cap);
        if (seen < warmup)
            return HUGE_VAL;
        if (seen == warmup || (seen - warmup) % quantile_refresh == 0)
            st.cap = sketch.quantile(m_cap.quantile);
        return st.cap;
    }

    record advance(std::size_t rank, rank_state& st) {
        const std::uint64_t index = st.next++;
        const double length = m_source->length(rank, index);
        const double cost = m_cost(length);
        if (!std::isfinite(cost) || cost < 0.0)
            throw input_error(fmt::format("record {} of rank {} has length {} and cost {}; the "
                                          "cost model must give a finite cost >= 0",
                                          index, rank, length, cost));
        const double cap = current_cap(rank, st);
        if (m_cap.kind == bcl::cap_kind::quantile)
            m_sketches[rank].add(cost); // the uncapped cost, as the balancer's sketch sees it
        if (cost <= cap)
            return {length, false};
        return {truncated_length(m_cost, length, cap), true};
    }

    static constexpr std::uint64_t quantile_refresh = 64; // bcl::balancer's refresh interval

    record_source* m_source;
    cost_model m_cost;
    bcl::cap_options m_cap;
    std::vector<rank_state> m_state;
    std::vector<bcl::quantile_sketch> m_sketches; // per rank, quantile caps only
};

// ---------------------------------------------------------------------------------------------
// Metrics.
// ---------------------------------------------------------------------------------------------

/// The metrics of one policy that depend on its per-(step, rank) costs alone.
struct step_metrics {
    /// mean over (step, rank) of the rank's step cost / mean over steps of the max over ranks.
    double efficiency = 1.0;
    /// stddev / mean of the per-(step, rank) costs (population stddev).
    double cv = 0.0;
    /// nearest-rank p99 over steps of the max over ranks / mean over (step, rank) of the cost.
    double p99_step_ratio = 1.0;
    double mean_rank_cost = 0.0; ///< mean over (step, rank): the ideal step time
    double mean_step_time = 0.0; ///< mean over steps of the max over ranks
    std::size_t steps = 0;
};

/// Streams per-step rank costs into the metrics; keeps O(steps) memory (for the trace).
class metrics_accumulator {
public:
    explicit metrics_accumulator(std::size_t steps_hint = 0) {
        m_step_max.reserve(steps_hint);
        m_step_mean.reserve(steps_hint);
    }

    /// One step: the cost of every rank. Every rank must have had a full batch.
    void add_step(std::span<const double> rank_costs) {
        double max = 0.0;
        double sum = 0.0;
        for (const double c : rank_costs) {
            m_all.add(c);
            max = std::max(max, c);
            sum += c;
        }
        m_step_max.push_back(max);
        m_step_mean.push_back(rank_costs.empty() ? 0.0
                                                 : sum / static_cast<double>(rank_costs.size()));
    }

    [[nodiscard]] step_metrics result() const {
        step_metrics m;
        m.steps = m_step_max.size();
        if (m.steps == 0)
            return m;
        double max_sum = 0.0;
        for (const double x : m_step_max)
            max_sum += x;
        m.mean_step_time = max_sum / static_cast<double>(m.steps);
        m.mean_rank_cost = m_all.mean();
        m.cv = m_all.cv();
        if (m.mean_step_time > 0.0) {
            m.efficiency = m.mean_rank_cost / m.mean_step_time;
            m.p99_step_ratio = nearest_rank(m_step_max, 0.99) / m.mean_rank_cost;
        }
        return m;
    }

    /// Max over ranks of each step so far.
    [[nodiscard]] const std::vector<double>& step_max() const noexcept { return m_step_max; }
    /// Mean over ranks of each step so far.
    [[nodiscard]] const std::vector<double>& step_mean() const noexcept { return m_step_mean; }

private:
    bcl::running_stats m_all; // every (step, rank) cost
    std::vector<double> m_step_max;
    std::vector<double> m_step_mean;
};

/// Metrics of a cost matrix given step-major: costs[s * ranks + r].
[[nodiscard]] inline step_metrics compute_metrics(std::span<const double> costs,
                                                  std::size_t ranks) {
    metrics_accumulator acc(ranks == 0 ? 0 : costs.size() / ranks);
    for (std::size_t s = 0; ranks != 0 && (s + 1) * ranks <= costs.size(); ++s)
        acc.add_step(costs.subspan(s * ranks, ranks));
    return acc.result();
}

/// 1 - cv/cv_none: the share of the per-rank batch-cost variability a policy removes (0 when the
/// reference has none).
[[nodiscard]] inline double cv_reduction(double cv, double cv_none) noexcept {
    return cv_none > 0.0 ? 1.0 - cv / cv_none : 0.0;
}

/// efficiency / efficiency_none. Every policy does the same work, so this is the ratio of mean
/// step times: how much faster training runs than without balancing.
[[nodiscard]] inline double speedup(double efficiency, double efficiency_none) noexcept {
    return efficiency_none > 0.0 ? efficiency / efficiency_none : 0.0;
}

// ---------------------------------------------------------------------------------------------
// Policies.
// ---------------------------------------------------------------------------------------------

/// Called once for every record a policy puts in a batch: the step, the rank, and the record's
/// global id (index * R + rank of the stream it came from). Optional; tests use it to check that
/// every record is emitted exactly once.
using emit_observer = std::function<void(std::size_t step, std::size_t rank, std::uint64_t id)>;

/// Everything a policy needs to run.
struct sim_context {
    std::size_t ranks = 8;     ///< R
    std::size_t batch = 16;    ///< B, records per rank per step
    std::size_t lookahead = 8; ///< K, batches per window of the windowed policies
    std::uint64_t seed = 1;
    cost_model cost = default_cost();
    record_source* source = nullptr;
    double bin_tokens = 0.0; ///< mffd bin capacity in tokens (already resolved, > 0)
    emit_observer observer;  ///< optional
    /// The cap of every policy, in cost units (bcl_cap()). The bcl policies hand it to their
    /// balancers. The baselines apply it only when it truncates, through `truncation`.
    bcl::cap_options cap{};
    /// Per-batch budget on the sum of lengths (tokens), 0 for none. The bcl policies balance
    /// within it; for every policy, batches above it are counted (over_budget_batches).
    double memory_budget = 0.0;
    /// The baselines' capped stream under a truncating cap (set by make_baseline); null otherwise.
    std::shared_ptr<stream_cap> truncation;
};

/// One record as a policy sees it.
struct sample {
    double length = 0.0;
    double cost = 0.0;
    std::uint64_t id = 0; ///< global id: index * R + rank
    bool capped = false;  ///< truncated by the cap (baselines under a truncating cap)
};

/// Reads rank `rank`'s index-th record (truncated, if ctx.truncation is set) and prices it.
/// Throws input_error if the cost model gives a non-finite cost (a length too large for it).
[[nodiscard]] inline sample fetch(const sim_context& ctx, std::size_t rank, std::uint64_t index) {
    double length = 0.0;
    bool capped = false;
    if (ctx.truncation) {
        const stream_cap::record rec = ctx.truncation->read(rank, index);
        length = rec.length;
        capped = rec.capped;
    } else {
        length = ctx.source->length(rank, index);
    }
    const double cost = ctx.cost(length);
    if (!std::isfinite(cost) || cost < 0.0)
        throw input_error(fmt::format("record {} of rank {} has length {} and cost {}; the cost "
                                      "model must give a finite cost >= 0",
                                      index, rank, length, cost));
    return {length, cost, index * ctx.ranks + rank, capped};
}

inline void observe(const sim_context& ctx, std::size_t step, std::size_t rank, std::uint64_t id) {
    if (ctx.observer)
        ctx.observer(step, rank, id);
}

/// What a policy reports besides its costs.
struct policy_extras {
    /// Mean over windows of (heaviest pack - lower bound) / lower bound, for policies that
    /// partition with bcl's partitioner; empty for the others.
    std::optional<double> mean_gap_to_lb;
    /// Largest number of steps a record was held beyond the step it arrives in on its rank
    /// (its index / B), i.e. beyond the batch fixed-count batching would have put it in.
    std::uint64_t max_delay_batches = 0;
    /// Records capped. bcl policies: the sum over ranks of bcl::statistics::records_capped
    /// (records pushed whose estimate was above the cap, clipped or truncated). Baselines: records
    /// emitted that the truncating cap shortened (0 under clip, which leaves them untouched).
    std::uint64_t capped = 0;
    /// bcl policies: the largest bcl::statistics::peak_batch_memory over ranks (the library's own
    /// count of the tokens of its largest batch; the simulator's peak_batch_tokens must agree).
    /// 0 for the others.
    double peak_batch_memory = 0.0;
    /// Anything the reader should know about this run of the policy.
    std::string note;
};

/// What a policy writes for a block of steps: at [(s - first) * R + r], the time rank r spends in
/// step s and the tokens (sum of lengths) of what it processes in that step. Both arrive zeroed.
struct step_block {
    std::span<double> costs;
    std::span<double> tokens;

    /// Rank r processes `x` in the block's step t.
    void charge(std::size_t t, std::size_t r, std::size_t ranks, const sample& x) const noexcept {
        costs[t * ranks + r] += x.cost;
        tokens[t * ranks + r] += x.length;
    }
};

/// One policy's simulation, advanced a block of steps at a time.
class policy_runner {
public:
    virtual ~policy_runner() = default;
    /// Simulates steps [first, first + count) into `out`. Called with consecutive blocks from
    /// step 0; `first` is a multiple of K and count <= K.
    virtual void run(std::size_t first, std::size_t count, step_block out) = 0;
    [[nodiscard]] virtual policy_extras extras() const = 0;
};

/// Arrival step of a rank's index-th record: the step fixed-count batching would put it in.
[[nodiscard]] inline std::uint64_t arrival_step(const sim_context& ctx,
                                                std::uint64_t index) noexcept {
    return index / ctx.batch;
}

/// `none`: consecutive fixed-count batches of each rank's stream (DistributedSampler + DataLoader).
class none_runner final : public policy_runner {
public:
    explicit none_runner(const sim_context& ctx) : m_ctx(ctx) {}
    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        for (std::size_t s = first; s < first + count; ++s)
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t j = 0; j < B; ++j) {
                    const sample x = fetch(m_ctx, r, std::uint64_t{s} * B + j);
                    out.charge(s - first, r, R, x);
                    m_capped += x.capped ? 1 : 0;
                    observe(m_ctx, s, r, x.id);
                }
    }
    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.capped = m_capped;
        return e;
    }

private:
    sim_context m_ctx;
    std::uint64_t m_capped = 0;
};

/// `length_grouped`: Hugging Face's group_by_length (LengthGroupedSampler, then accelerate's
/// batch sharding). The global sampler order is cut into megabatches of mult * B records
/// (mult = min(N / (4B), 50), at least 1, and 50 for an endless synthetic stream); each megabatch
/// is sorted by length, longest first (stably); per epoch, the longest record is swapped to the
/// front of the first megabatch. The result is cut into batches of B, and batch q goes to rank
/// q mod R in step q / R.
class length_grouped_runner final : public policy_runner {
public:
    explicit length_grouped_runner(const sim_context& ctx) : m_ctx(ctx) {
        const std::optional<std::uint64_t> n = ctx.source->dataset_size();
        std::uint64_t mult = 50;
        if (n)
            mult = std::clamp<std::uint64_t>(*n / (4 * std::uint64_t{ctx.batch}), 1, 50);
        m_megabatch = mult * ctx.batch;
        m_epoch = ctx.source->global_epoch();
    }

    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        const std::uint64_t step_records = std::uint64_t{R} * B;
        fill_to((first + count) * step_records);
        for (std::size_t s = first; s < first + count; ++s)
            for (std::size_t r = 0; r < R; ++r) {
                const std::uint64_t begin = (std::uint64_t{s} * R + r) * B; // grouped position
                for (std::size_t j = 0; j < B; ++j) {
                    const sample& x = m_items[static_cast<std::size_t>(begin + j - m_base)];
                    out.charge(s - first, r, R, x);
                    m_capped += x.capped ? 1 : 0;
                    observe(m_ctx, s, r, x.id);
                    const std::uint64_t arrival = arrival_step(m_ctx, x.id / R);
                    if (s > arrival)
                        m_max_delay = std::max<std::uint64_t>(m_max_delay, s - arrival);
                }
            }
        // Drop what every later step is past.
        const std::uint64_t done = (first + count) * step_records;
        if (done - m_base > (std::uint64_t{1} << 20)) {
            m_items.erase(m_items.begin(),
                          m_items.begin() + static_cast<std::ptrdiff_t>(done - m_base));
            m_base = done;
        }
    }

    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.max_delay_batches = m_max_delay;
        e.capped = m_capped;
        e.note = fmt::format("megabatches of {} records", m_megabatch);
        return e;
    }

private:
    // Groups more of the global order until grouped positions [m_base, end) are available.
    void fill_to(std::uint64_t end) {
        while (m_base + m_items.size() < end) {
            // One grouping unit: a whole epoch (for the swap of its longest record to the front),
            // or one megabatch of an endless stream.
            const std::uint64_t unit = m_epoch ? *m_epoch : m_megabatch;
            const std::size_t start = m_items.size();
            for (std::uint64_t g = m_next; g < m_next + unit; ++g)
                m_items.push_back(
                    fetch(m_ctx, static_cast<std::size_t>(g % m_ctx.ranks), g / m_ctx.ranks));
            m_next += unit;
            const auto longer = [](const sample& a, const sample& b) {
                return a.length > b.length;
            };
            std::size_t longest_group = start; // start of the megabatch with the longest record
            for (std::size_t mb = start; mb < m_items.size(); mb += m_megabatch) {
                const std::size_t mb_end = std::min<std::size_t>(mb + m_megabatch, m_items.size());
                std::stable_sort(m_items.begin() + static_cast<std::ptrdiff_t>(mb),
                                 m_items.begin() + static_cast<std::ptrdiff_t>(mb_end), longer);
                if (m_items[mb].length > m_items[longest_group].length)
                    longest_group = mb;
            }
            if (m_epoch)
                std::swap(m_items[start], m_items[longest_group]);
        }
    }

    sim_context m_ctx;
    std::uint64_t m_megabatch = 0;
    std::optional<std::uint64_t> m_epoch;
    std::vector<sample> m_items; // grouped order, starting at grouped position m_base
    std::uint64_t m_base = 0;
    std::uint64_t m_next = 0; // next global position to group
    std::uint64_t m_max_delay = 0;
    std::uint64_t m_capped = 0;
};

/// Modified first-fit decreasing (Johnson and Garey, 1985) as NeMo-RL uses it for sequence
/// packing, over item lengths with bin capacity `capacity`. Items are large (> C/2), medium
/// (> C/3), small (> C/6) or tiny. 1: each large item opens a bin, longest first. 2: forward over
/// those bins, add the longest medium item that fits. 3: backward over the large bins without a
/// medium item, add the shortest small item and the longest small item that fits beside it, if
/// both fit. 4: forward over the large bins, keep adding the longest remaining item that fits.
/// 5: first-fit decreasing of what is left into new bins. An item longer than the capacity is
/// large, so it gets a bin of its own. Returns the bins as lists of item indices; deterministic
/// (ties by index).
[[nodiscard]] inline std::vector<std::vector<std::uint32_t>>
mffd_pack(std::span<const double> lengths, double capacity) {
    using key = std::pair<double, std::uint32_t>; // (length, index)
    const std::size_t n = lengths.size();
    std::vector<std::vector<std::uint32_t>> bins;
    std::vector<key> large;
    std::vector<key> rest; // medium, small and tiny: whatever phases 1-4 leave for phase 5
    for (std::size_t i = 0; i < n; ++i) {
        const key k{lengths[i], static_cast<std::uint32_t>(i)};
        (k.first > capacity / 2 ? large : rest).push_back(k);
    }

    if (!large.empty()) {
        // Largest element of `pool` not longer than `room`, or end().
        const auto longest_fitting = [](std::multiset<key>& pool, double room) {
            auto it = pool.upper_bound({room, std::numeric_limits<std::uint32_t>::max()});
            return it == pool.begin() ? pool.end() : std::prev(it);
        };
        std::multiset<key> medium, small, tiny;
        for (const key& k : rest) {
            if (k.first > capacity / 3)
                medium.insert(k);
            else if (k.first > capacity / 6)
                small.insert(k);
            else
                tiny.insert(k);
        }
        std::sort(large.begin(), large.end(), [](const key& x, const key& y) {
            return x.first > y.first || (x.first == y.first && x.second < y.second);
        });
        std::vector<double> used;    // tokens in each large bin
        for (const key& k : large) { // phase 1
            bins.push_back({k.second});
            used.push_back(k.first);
        }
        const std::size_t nl = bins.size();
        std::vector<bool> has_medium(nl, false);
        for (std::size_t b = 0; b < nl; ++b) { // phase 2
            const auto it = longest_fitting(medium, capacity - used[b]);
            if (it == medium.end())
                continue;
            bins[b].push_back(it->second);
            used[b] += it->first;
            has_medium[b] = true;
            medium.erase(it);
        }
        for (std::size_t b = nl; b-- > 0;) { // phase 3
            if (has_medium[b] || small.size() < 2)
                continue;
            const double room = capacity - used[b];
            const auto s1 = small.begin();
            if (s1->first + std::next(s1)->first > room)
                continue;
            const key first_small = *s1;
            small.erase(s1);
            const auto s2 = longest_fitting(small, room - first_small.first);
            bins[b].push_back(first_small.second);
            bins[b].push_back(s2->second);
            used[b] += first_small.first + s2->first;
            small.erase(s2);
        }
        tiny.insert(medium.begin(), medium.end());
        tiny.insert(small.begin(), small.end());
        for (std::size_t b = 0; b < nl; ++b) { // phase 4
            for (auto it = longest_fitting(tiny, capacity - used[b]); it != tiny.end();
                 it = longest_fitting(tiny, capacity - used[b])) {
                bins[b].push_back(it->second);
                used[b] += it->first;
                tiny.erase(it);
            }
        }
        rest.assign(tiny.begin(), tiny.end());
    }
    std::sort(rest.begin(), rest.end(), [](const key& x, const key& y) {
        return x.first > y.first || (x.first == y.first && x.second < y.second);
    });

    // Phase 5: first fit, longest first, over a row of bins whose unopened ones are empty (every
    // item left is at most C/2, so it fits an empty bin). A max tree over the bins' free room finds
    // the leftmost bin with enough room in O(log n); leaves open left to right, so leaf i is the
    // i-th new bin.
    if (!rest.empty()) {
        std::size_t leaves = 1;
        while (leaves < rest.size())
            leaves *= 2;
        std::vector<double> room(2 * leaves, capacity);
        const std::size_t first_new = bins.size();
        for (const key& k : rest) {
            std::size_t node = 1;
            while (node < leaves)
                node = room[2 * node] >= k.first ? 2 * node : 2 * node + 1;
            const std::size_t b = first_new + (node - leaves);
            if (b == bins.size())
                bins.emplace_back();
            bins[b].push_back(k.second);
            room[node] -= k.first;
            for (node /= 2; node >= 1; node /= 2)
                room[node] = std::max(room[2 * node], room[2 * node + 1]);
        }
    }
    return bins;
}

/// NeMo-RL's bin-count rounding: adds bins until their number is a multiple of `multiple`, each
/// new bin taking the last-added item of the bin that holds the most items (ties: the first such
/// bin). Needs at least that many items in total.
inline void round_bins_up(std::vector<std::vector<std::uint32_t>>& bins, std::size_t multiple) {
    if (multiple == 0)
        return;
    const std::size_t target = (bins.size() + multiple - 1) / multiple * multiple;
    if (target == bins.size())
        return;
    // Max-heap on (items, -bin index).
    using entry = std::pair<std::size_t, std::size_t>; // (items, bin)
    const auto before = [](const entry& a, const entry& b) {
        return a.first < b.first || (a.first == b.first && a.second > b.second);
    };
    std::priority_queue<entry, std::vector<entry>, decltype(before)> heap(before);
    for (std::size_t b = 0; b < bins.size(); ++b)
        heap.emplace(bins[b].size(), b);
    while (bins.size() < target) {
        const auto [items, b] = heap.top();
        if (items < 2)
            throw std::logic_error("round_bins_up: not enough items to fill the bins");
        heap.pop();
        const std::uint32_t moved = bins[b].back();
        bins[b].pop_back();
        heap.emplace(items - 1, b);
        bins.push_back({moved});
        heap.emplace(1, bins.size() - 1);
    }
}

/// `mffd`: NeMo-RL-style pooled sequence packing. Each step's R*B records (global positions
/// [s*R*B, (s+1)*R*B), the records fixed-count batching would use in that step) are packed into
/// token bins with mffd_pack, the bin count is rounded up to a multiple of R (round_bins_up),
/// and bin j goes to rank j mod R. A rank's time is the sum of its bins' record costs (packed
/// sequences with per-document attention).
class mffd_runner final : public policy_runner {
public:
    explicit mffd_runner(const sim_context& ctx) : m_ctx(ctx) {}
    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        std::vector<sample> items(R * B);
        std::vector<double> lengths(R * B);
        for (std::size_t s = first; s < first + count; ++s) {
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t j = 0; j < B; ++j) {
                    items[r * B + j] = fetch(m_ctx, r, std::uint64_t{s} * B + j);
                    lengths[r * B + j] = items[r * B + j].length;
                }
            auto bins = mffd_pack(lengths, m_ctx.bin_tokens);
            m_packed_bins += bins.size();
            ++m_steps;
            round_bins_up(bins, R);
            m_bins_per_rank = std::max(m_bins_per_rank, bins.size() / R);
            for (std::size_t b = 0; b < bins.size(); ++b) {
                const std::size_t rank = b % R;
                for (const std::uint32_t i : bins[b]) {
                    out.charge(s - first, rank, R, items[i]);
                    m_capped += items[i].capped ? 1 : 0;
                    observe(m_ctx, s, rank, items[i].id);
                }
            }
        }
    }
    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.capped = m_capped;
        const double packed =
            m_steps > 0 ? static_cast<double>(m_packed_bins) / static_cast<double>(m_steps) : 0.0;
        e.note = fmt::format("bins of {} tokens; MFFD packs {:.1f} bins per step on average, "
                             "rounded up to a multiple of R = {} (at most {} per rank)",
                             m_ctx.bin_tokens, packed, m_ctx.ranks, m_bins_per_rank);
        if (packed < static_cast<double>(m_ctx.ranks))
            e.note += fmt::format(
                ". Fewer packed bins than ranks: the extra bins hold one record each, so most "
                "ranks idle. Pass --bin-tokens with the trainer's micro-batch token budget "
                "(e.g. the max sequence length) to model a typical NeMo-RL setup");
        return e;
    }

private:
    sim_context m_ctx;
    std::size_t m_bins_per_rank = 0;
    std::size_t m_packed_bins = 0; // before rounding up
    std::size_t m_steps = 0;
    std::uint64_t m_capped = 0;
};

/// `oracle`: a coordinated reference with cross-rank communication (verl-style). For each window
/// of K steps, all R ranks' K*B-record windows are partitioned together by bcl's
/// lpt_swap_partitioner into R*K packs of B. The packs are sorted by cost, heaviest first, and cut
/// into K groups of R consecutive packs: grouping packs of similar cost into the same step
/// minimizes the sum over steps of the heaviest pack. The groups go to the window's K steps in a
/// seeded random order (so no step is systematically the heaviest), and within a group rank r
/// takes the r-th pack.
class oracle_runner final : public policy_runner {
public:
    explicit oracle_runner(const sim_context& ctx) : m_ctx(ctx) {}

    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        const std::size_t K = m_ctx.lookahead;
        const std::size_t window = K * B;
        const std::size_t n = R * window;
        const std::size_t packs = R * K;
        m_items.resize(n);
        m_costs.resize(n);
        m_pack_of.resize(n);
        for (std::size_t r = 0; r < R; ++r)
            for (std::size_t i = 0; i < window; ++i) {
                m_items[r * window + i] = fetch(m_ctx, r, std::uint64_t{first} * B + i);
                m_costs[r * window + i] = m_items[r * window + i].cost;
            }
        const bcl::partition_summary summary =
            m_partitioner(std::span<const double>(m_costs), bcl::pack_shape{packs, B},
                          std::span<std::uint32_t>(m_pack_of));
        m_gap.add(summary.lower_bound > 0.0
                      ? std::max(0.0, summary.heaviest / summary.lower_bound - 1.0)
                      : 0.0);

        m_pack_cost.assign(packs, 0.0);
        for (std::size_t i = 0; i < n; ++i)
            m_pack_cost[m_pack_of[i]] += m_costs[i];
        m_order.resize(packs);
        for (std::size_t p = 0; p < packs; ++p)
            m_order[p] = static_cast<std::uint32_t>(p);
        std::sort(m_order.begin(), m_order.end(), [this](std::uint32_t a, std::uint32_t b) {
            return m_pack_cost[a] > m_pack_cost[b] || (m_pack_cost[a] == m_pack_cost[b] && a < b);
        });
        std::vector<std::uint32_t> group_of_step(K);
        for (std::size_t t = 0; t < K; ++t)
            group_of_step[t] = static_cast<std::uint32_t>(t);
        splitmix rng(stream_key(m_ctx.seed, domain::oracle, first / K));
        shuffle(std::span<std::uint32_t>(group_of_step), rng);
        // (step offset, rank) of every pack.
        m_slot_of_pack.resize(packs);
        for (std::size_t t = 0; t < K; ++t)
            for (std::size_t r = 0; r < R; ++r)
                m_slot_of_pack[m_order[group_of_step[t] * R + r]] = {t, r};

        for (std::size_t i = 0; i < n; ++i) {
            const auto [t, r] = m_slot_of_pack[m_pack_of[i]];
            if (t >= count)
                continue; // past the end of the run
            out.charge(t, r, R, m_items[i]);
            m_capped += m_items[i].capped ? 1 : 0;
            const std::size_t s = first + t;
            observe(m_ctx, s, r, m_items[i].id);
            const std::uint64_t arrival =
                arrival_step(m_ctx, std::uint64_t{first} * B + i % window);
            if (s > arrival)
                m_max_delay = std::max<std::uint64_t>(m_max_delay, s - arrival);
        }
    }

    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.mean_gap_to_lb = m_gap.mean();
        e.max_delay_batches = m_max_delay;
        e.capped = m_capped;
        return e;
    }

private:
    sim_context m_ctx;
    bcl::lpt_swap_partitioner m_partitioner;
    std::vector<sample> m_items;
    std::vector<double> m_costs;
    std::vector<std::uint32_t> m_pack_of;
    std::vector<double> m_pack_cost;
    std::vector<std::uint32_t> m_order;
    std::vector<std::pair<std::size_t, std::size_t>> m_slot_of_pack;
    bcl::running_stats m_gap;
    std::uint64_t m_max_delay = 0;
    std::uint64_t m_capped = 0;
};

/// A record as the bcl balancers in the simulator see it.
struct sim_record {
    std::uint64_t id;
    double length; ///< tokens; what the memory budget counts (shrunk by a truncating cap)
    double cost;   ///< the true cost of `length`; what the rank spends on it
};

/// The cost estimate the simulated balancers use: the true cost, a perfect estimate.
struct true_cost {
    [[nodiscard]] double operator()(const sim_record& r) const noexcept { return r.cost; }
};

/// The truncation bcl calls for a record whose cost is above the cap: the record keeps the
/// largest whole number of tokens whose cost is within the cap (truncated_length), and its true
/// cost becomes the cost of that length.
struct truncate_record {
    cost_model cost;
    void operator()(sim_record& r, double cap) const {
        r.length = truncated_length(cost, r.length, cap);
        r.cost = cost(r.length);
    }
};

/// The estimator of the simulated balancers, built from bcl's public pieces: the true cost, the
/// record's length as its memory estimate (bcl::with_memory; what --memory-budget bounds), and the
/// truncation (bcl::with_truncation; called only under --cap-action truncate).
using sim_estimator = decltype(bcl::with_truncation(
    bcl::with_memory(true_cost{}, &sim_record::length), truncate_record{}));

[[nodiscard]] inline sim_estimator make_sim_estimator(const cost_model& cost) {
    return bcl::with_truncation(bcl::with_memory(true_cost{}, &sim_record::length),
                                truncate_record{cost});
}

/// A rank-local bcl policy: one bcl::balancer per rank, no communication. Each step, each rank
/// pops its next batch, pushing records from its own stream until one is ready, exactly as a
/// training loop would. The rank's time is the sum of its batch's true costs (a clipped estimate
/// changes what the balancer sees, not what the rank spends; a truncated record costs less). The
/// options decide which bcl policy it is: tumbling or sliding, with the run's cap and memory
/// budget. A bcl::error from a balancer (a record alone over the memory budget, a round that
/// cannot be split within it) propagates, prefixed with the policy, rank and step.
class bcl_local_runner final : public policy_runner {
public:
    using balancer_type = bcl::balancer<sim_record, sim_estimator>;

    bcl_local_runner(std::string_view name, const sim_context& ctx,
                     const std::function<bcl::options(std::size_t rank)>& make_options)
        : m_name(name), m_ctx(ctx), m_next(ctx.ranks, 0) {
        m_balancers.reserve(ctx.ranks);
        for (std::size_t r = 0; r < ctx.ranks; ++r)
            m_balancers.emplace_back(make_sim_estimator(ctx.cost), make_options(r));
    }

    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        for (std::size_t s = first; s < first + count; ++s)
            for (std::size_t r = 0; r < R; ++r) {
                balancer_type& bal = m_balancers[r];
                std::optional<balancer_type::batch_type> batch;
                try {
                    while (!(batch = bal.pop())) {
                        const sample x = fetch(m_ctx, r, m_next[r]++);
                        bal.push(sim_record{x.id, x.length, x.cost});
                    }
                } catch (const bcl::error& e) {
                    throw bcl::error(
                        fmt::format("policy {}, rank {}, step {}: {}", m_name, r, s, e.what()));
                }
                if (batch->size() != m_ctx.batch)
                    throw std::logic_error("bcl balancer emitted a short batch mid-stream");
                for (const sim_record& rec : *batch) {
                    out.charge(s - first, r, R, sample{rec.length, rec.cost, rec.id, false});
                    observe(m_ctx, s, r, rec.id);
                }
            }
    }

    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        double weighted = 0.0;
        std::uint64_t windows = 0;
        for (const balancer_type& bal : m_balancers) {
            const bcl::statistics& st = bal.stats();
            weighted +=
                st.gap_to_lower_bound.mean() * static_cast<double>(st.gap_to_lower_bound.count());
            windows += st.gap_to_lower_bound.count();
            e.max_delay_batches = std::max(e.max_delay_batches, st.max_delay_batches);
            e.capped += st.records_capped;
            e.peak_batch_memory = std::max(e.peak_batch_memory, st.peak_batch_memory);
        }
        e.mean_gap_to_lb = windows > 0 ? weighted / static_cast<double>(windows) : 0.0;
        return e;
    }

private:
    std::string m_name;
    sim_context m_ctx;
    std::vector<balancer_type> m_balancers;
    std::vector<std::uint64_t> m_next; // next stream index per rank
};

// ---------------------------------------------------------------------------------------------
// The policy table. A new policy is one more entry here.
// ---------------------------------------------------------------------------------------------

/// Every input of a simulation run.
struct sim_config {
    std::string dist_text = "lognormal:mu=6,sigma=1";
    dist_spec dist = lognormal_spec{};
    cost_model cost = default_cost();
    std::size_t ranks = 8;
    std::size_t batch = 16;
    std::size_t lookahead = 8;
    std::size_t steps = 2000;
    std::uint64_t seed = 1;
    std::vector<std::string> policies; ///< empty: every policy in the table
    double bin_tokens = 0.0;           ///< mffd bin capacity; 0: B times the p99 length
    /// The oracle partitions R*K*B records at once; above this many ranks it is skipped.
    std::size_t oracle_max_ranks = 128;
    cap_spec cap;                                       ///< --cap (default none)
    bcl::cap_action cap_action = bcl::cap_action::clip; ///< --cap-action
    double memory_budget = 0.0; ///< --memory-budget, tokens per rank-batch; 0 for none
};

struct policy_entry {
    std::string_view name;
    std::string_view models; ///< one line: what it stands for
    /// Builds the runner. `ctx.source` is a fresh source for this policy.
    std::unique_ptr<policy_runner> (*make)(const sim_context& ctx);
    /// Why the policy cannot run with this configuration, or nothing if it can.
    std::optional<std::string> (*skip)(const sim_config& cfg);
};

[[nodiscard]] inline std::optional<std::string> never_skip(const sim_config&) {
    return {};
}

/// The options of rank `rank`'s balancer under a bcl policy: B and K from the run, a seed per rank,
/// the run's cap and memory budget, every other setting at bcl's default (sliding: 2 windows of
/// buffer, max_age 2).
[[nodiscard]] inline bcl::options bcl_options(const sim_context& ctx, std::size_t rank,
                                              bcl::lookahead_policy policy) {
    bcl::options opt{.batch_size = ctx.batch,
                     .lookahead = ctx.lookahead,
                     .drop_last = false,
                     .seed = stream_key(ctx.seed, domain::bcl, rank)};
    opt.policy = policy;
    opt.cap = ctx.cap;
    opt.memory_budget = ctx.memory_budget;
    return opt;
}

template <bcl::lookahead_policy Policy>
[[nodiscard]] std::unique_ptr<policy_runner> make_bcl_runner(const sim_context& ctx) {
    const std::string_view name = Policy == bcl::lookahead_policy::sliding ? "sliding" : "tumbling";
    return std::make_unique<bcl_local_runner>(
        name, ctx, [&ctx](std::size_t rank) { return bcl_options(ctx, rank, Policy); });
}

/// A baseline's runner. Under a truncating cap it reads the capped stream (stream_cap), so it runs
/// on the same truncated records as the bcl policies; a clipping cap leaves its records alone.
template <class Runner>
[[nodiscard]] std::unique_ptr<policy_runner> make_baseline(const sim_context& ctx) {
    sim_context c = ctx;
    if (ctx.cap.kind != bcl::cap_kind::none && ctx.cap.action == bcl::cap_action::truncate)
        c.truncation = std::make_shared<stream_cap>(ctx.source, ctx.cost, ctx.cap, ctx.ranks);
    return std::make_unique<Runner>(c);
}

[[nodiscard]] inline const std::vector<policy_entry>& policy_table() {
    static const std::vector<policy_entry> table{
        {"none", "fixed-count batches in sampler order (PyTorch DistributedSampler + DataLoader)",
         make_baseline<none_runner>, never_skip},
        {"length_grouped", "Hugging Face group_by_length: megabatches sorted by length",
         make_baseline<length_grouped_runner>, never_skip},
        {"mffd", "NeMo-RL sequence packing: pooled MFFD token bins dealt round-robin",
         make_baseline<mffd_runner>, never_skip},
        {"oracle", "all ranks' windows partitioned together (needs cross-rank communication)",
         make_baseline<oracle_runner>,
         [](const sim_config& cfg) -> std::optional<std::string> {
             const std::uint64_t window = std::uint64_t{cfg.ranks} * cfg.lookahead * cfg.batch;
             if (window > bcl::max_window_records)
                 return fmt::format("oracle skipped: R*K*B = {} records per window is more than "
                                    "one partition call takes ({})",
                                    window, bcl::max_window_records);
             if (cfg.ranks <= cfg.oracle_max_ranks)
                 return {};
             return fmt::format("oracle skipped: R = {} > --oracle-max-ranks = {} (it partitions "
                                "R*K*B = {} records per window at once); raise the limit to run it",
                                cfg.ranks, cfg.oracle_max_ranks,
                                cfg.ranks * cfg.lookahead * cfg.batch);
         }},
        {"tumbling", "bcl tumbling windows, rank-local (bcl::balancer per rank)",
         make_bcl_runner<bcl::lookahead_policy::tumbling>, never_skip},
        {"sliding", "bcl sliding buffer toward the long-run mean, rank-local",
         make_bcl_runner<bcl::lookahead_policy::sliding>, never_skip},
    };
    return table;
}

[[nodiscard]] inline const policy_entry* find_policy(std::string_view name) {
    for (const policy_entry& e : policy_table())
        if (e.name == name)
            return &e;
    return nullptr;
}

/// The names of every policy in the table, comma-separated.
[[nodiscard]] inline std::string policy_names() {
    std::string names;
    for (const policy_entry& e : policy_table()) {
        if (!names.empty())
            names += ',';
        names += e.name;
    }
    return names;
}

// ---------------------------------------------------------------------------------------------
// Running a simulation.
// ---------------------------------------------------------------------------------------------

/// One policy's outcome.
struct policy_result {
    std::string name;
    step_metrics metrics;
    double cv_reduction = 0.0;
    double speedup_vs_none = 0.0;
    policy_extras extras;
    double seconds = 0.0;
    std::vector<double> step_max;  ///< max over ranks, per step (the trace)
    std::vector<double> step_mean; ///< mean over ranks, per step
    /// Largest sum of lengths of one rank's batch in one step (mffd: all of the rank's bins).
    double peak_batch_tokens = 0.0;
    /// Rank-batches whose sum of lengths is above the memory budget; 0 without one.
    std::uint64_t over_budget_batches = 0;
};

/// Runs one policy for `steps` steps. `ctx.source` must be fresh (unread) for this policy.
[[nodiscard]] inline policy_result run_policy(const policy_entry& entry, const sim_context& ctx,
                                              std::size_t steps) {
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<policy_runner> runner = entry.make(ctx);
    metrics_accumulator acc(steps);
    std::vector<double> block(ctx.lookahead * ctx.ranks);
    std::vector<double> tokens(ctx.lookahead * ctx.ranks);
    double peak_tokens = 0.0;
    std::uint64_t over_budget = 0;
    for (std::size_t first = 0; first < steps; first += ctx.lookahead) {
        const std::size_t count = std::min(ctx.lookahead, steps - first);
        const step_block out{std::span<double>(block.data(), count * ctx.ranks),
                             std::span<double>(tokens.data(), count * ctx.ranks)};
        std::fill(out.costs.begin(), out.costs.end(), 0.0);
        std::fill(out.tokens.begin(), out.tokens.end(), 0.0);
        runner->run(first, count, out);
        for (std::size_t t = 0; t < count; ++t)
            acc.add_step(out.costs.subspan(t * ctx.ranks, ctx.ranks));
        for (const double x : out.tokens) {
            peak_tokens = std::max(peak_tokens, x);
            over_budget += ctx.memory_budget > 0.0 && x > ctx.memory_budget ? 1 : 0;
        }
    }
    policy_result res;
    res.peak_batch_tokens = peak_tokens;
    res.over_budget_batches = over_budget;
    res.name = std::string(entry.name);
    res.metrics = acc.result();
    res.extras = runner->extras();
    res.step_max = acc.step_max();
    res.step_mean = acc.step_mean();
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return res;
}

/// Fills in cv_reduction and speedup_vs_none against the `none` result.
inline void relate_to_none(policy_result& res, const policy_result& none) noexcept {
    res.cv_reduction = cv_reduction(res.metrics.cv, none.metrics.cv);
    res.speedup_vs_none = speedup(res.metrics.efficiency, none.metrics.efficiency);
}

struct skipped_policy {
    std::string name;
    std::string reason;
};

/// The outcome of a run, with the inputs it resolved.
struct sim_result {
    std::optional<std::uint64_t> dataset_records; ///< lines in the workload file
    double p99_length = 0.0;  ///< nearest-rank p99 of the lengths (file, or a pilot sample)
    double mean_length = 0.0; ///< mean of the lengths (file, or the same pilot sample)
    double bin_tokens = 0.0;  ///< mffd bin capacity used
    bcl::cap_options cap;     ///< the cap every policy ran with, in cost units
    std::vector<policy_result> policies;
    std::vector<skipped_policy> skipped;
};

/// Makes a fresh source: one per policy, so every policy reads the same records from the start.
using source_factory = std::function<std::unique_ptr<record_source>()>;

/// Checks the numeric inputs; throws input_error naming the first bad one.
inline void validate(const sim_config& cfg) {
    const auto positive = [](std::size_t v, std::string_view flag) {
        if (v == 0)
            throw input_error(fmt::format("{} must be at least 1", flag));
    };
    positive(cfg.ranks, "--ranks");
    positive(cfg.batch, "--batch");
    positive(cfg.lookahead, "--lookahead");
    positive(cfg.steps, "--steps");
    if (cfg.ranks > (std::size_t{1} << 20))
        throw input_error("--ranks must be at most 1048576");
    if (std::uint64_t{cfg.ranks} * cfg.batch > (std::uint64_t{1} << 30))
        throw input_error("--ranks * --batch must be at most 2^30 records per step");
    if (!(cfg.bin_tokens >= 0.0) || !std::isfinite(cfg.bin_tokens))
        throw input_error("--bin-tokens must be a finite number >= 0");
    if (!(cfg.memory_budget >= 0.0) || !std::isfinite(cfg.memory_budget))
        throw input_error(fmt::format(
            "--memory-budget must be a finite number of tokens >= 0 (0 for none), got {}",
            cfg.memory_budget));
    if (cfg.cap.kind == bcl::cap_kind::fixed && !(cfg.cap.tokens > 0.0))
        throw input_error("--cap: a fixed cap must be a length > 0");
    if (cfg.cap.kind == bcl::cap_kind::quantile &&
        !(cfg.cap.quantile > 0.0 && cfg.cap.quantile < 1.0))
        throw input_error("--cap: the percentile must be above 0 and below 100");
    bcl::options opt{.batch_size = cfg.batch, .lookahead = cfg.lookahead};
    opt.cap = bcl_cap(cfg.cap, cfg.cap_action, cfg.cost); // throws for a cap that costs nothing
    opt.memory_budget = cfg.memory_budget;
    try {
        bcl::validate(opt);
    } catch (const bcl::error& e) {
        throw input_error(e.what());
    }
    for (const std::string& name : cfg.policies)
        if (!find_policy(name))
            throw input_error(fmt::format("--policy: unknown policy '{}' (expected some of {})",
                                          name, policy_names()));
}

/// Runs every requested policy (none is always simulated: the others are measured against it).
/// The source factory may be given for hand-made streams; otherwise it follows cfg.dist.
/// Throws input_error for bad input.
[[nodiscard]] inline sim_result simulate(const sim_config& cfg, source_factory make_source = {},
                                         const emit_observer& observer = {}) {
    validate(cfg);
    sim_result out;
    if (!make_source) {
        if (const auto* file = std::get_if<file_spec>(&cfg.dist)) {
            auto lengths = std::make_shared<const std::vector<double>>(load_lengths(file->path));
            out.dataset_records = lengths->size();
            out.p99_length = nearest_rank(*lengths, 0.99);
            out.mean_length = mean_of(*lengths);
            const std::size_t per_rank = (lengths->size() + cfg.ranks - 1) / cfg.ranks;
            // Enough cache slots for every epoch one oracle window touches, with room to spare.
            const std::size_t slots = 2 * (cfg.lookahead * cfg.batch / per_rank) + 4;
            make_source = [lengths, ranks = cfg.ranks, seed = cfg.seed, slots] {
                return std::make_unique<file_source>(lengths, ranks, seed, slots);
            };
        } else {
            // A fixed pilot sample (independent of the seed) stands in for the p99.
            constexpr std::size_t pilot = 1 << 16;
            std::vector<double> sample_lengths(pilot);
            const std::uint64_t key = stream_key(0, domain::pilot, 0);
            for (std::size_t i = 0; i < pilot; ++i)
                sample_lengths[i] = draw_length(cfg.dist, key, i);
            out.mean_length = mean_of(sample_lengths);
            out.p99_length = nearest_rank(std::move(sample_lengths), 0.99);
            make_source = [dist = cfg.dist, ranks = cfg.ranks, seed = cfg.seed] {
                return std::make_unique<synthetic_source>(dist, ranks, seed);
            };
        }
    }
    out.bin_tokens =
        cfg.bin_tokens > 0.0 ? cfg.bin_tokens : static_cast<double>(cfg.batch) * out.p99_length;
    if (!(out.bin_tokens > 0.0))
        out.bin_tokens = 1.0; // all lengths 0: any capacity will do
    out.cap = bcl_cap(cfg.cap, cfg.cap_action, cfg.cost);

    std::vector<const policy_entry*> wanted;
    if (cfg.policies.empty())
        for (const policy_entry& e : policy_table())
            wanted.push_back(&e);
    else
        for (const std::string& name : cfg.policies) {
            const policy_entry* e = find_policy(name);
            if (std::find(wanted.begin(), wanted.end(), e) == wanted.end())
                wanted.push_back(e);
        }

    const auto run_one = [&](const policy_entry& e) {
        std::unique_ptr<record_source> source = make_source();
        const sim_context ctx{
            cfg.ranks,      cfg.batch, cfg.lookahead, cfg.seed,          cfg.cost, source.get(),
            out.bin_tokens, observer,  out.cap,       cfg.memory_budget, {}};
        return run_policy(e, ctx, cfg.steps);
    };

    const policy_entry* none_entry = find_policy("none");
    const bool none_wanted = std::find(wanted.begin(), wanted.end(), none_entry) != wanted.end();
    // The reference run is silent: the observer sees only the policies that were asked for.
    const policy_result none = none_wanted ? run_one(*none_entry) : [&] {
        std::unique_ptr<record_source> source = make_source();
        const sim_context ctx{
            cfg.ranks,      cfg.batch, cfg.lookahead, cfg.seed,          cfg.cost, source.get(),
            out.bin_tokens, {},        out.cap,       cfg.memory_budget, {}};
        return run_policy(*none_entry, ctx, cfg.steps);
    }();

    for (const policy_entry* e : wanted) {
        if (std::optional<std::string> reason = e->skip(cfg)) {
            out.skipped.push_back({std::string(e->name), std::move(*reason)});
            continue;
        }
        policy_result res = e == none_entry ? none : run_one(*e);
        relate_to_none(res, none);
        out.policies.push_back(std::move(res));
    }
    return out;
}

} // namespace bcl_sim
