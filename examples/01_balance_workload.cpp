// This example demonstrates bcl::balance on a real workload: it reads record lengths (one per
// line), shuffles them as a training loader does each epoch, balances them into batches of 16
// with a lookahead of 8 batches under the cost L + L^2/24576 (a 7B-transformer FLOPs proxy)
// under both lookahead policies (sliding also aimed at the epoch's own mean cost), and prints how
// much the per-batch cost variability falls against plain consecutive batches of the same
// shuffled records (and of the file's own order).
// Requires: a lengths file (argv[1]); the bundled ones are in bench/workloads/. Optional argv[2]
// is the batch size, argv[3] the lookahead.
// Bad input (a file it cannot read, a line that is not a token count, a bad argument) ends it
// with one line on stderr that names the file, the line and the value, and exit code 2.

#include "example_samples.hpp"

#include <bcl/bcl.hpp>

#include <fmt/core.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace {

struct sample {
    std::size_t id;
    double tokens;
};

/// Input this program cannot use: exit code 2.
struct bad_input : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// The longest record: 2^31 tokens. A longer one is a typo or a broken file, not a record.
constexpr std::uint64_t max_tokens = std::uint64_t{1} << 31;

/// `text` (blanks around it allowed) as a whole number from 0 to `max` in plain decimal; nothing
/// else: no sign, no fraction, no exponent.
std::optional<std::uint64_t> whole_number(std::string_view text, std::uint64_t max) {
    const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
    while (!text.empty() && blank(text.front())) text.remove_prefix(1);
    while (!text.empty() && blank(text.back())) text.remove_suffix(1);
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value > max)
        return std::nullopt;
    return value;
}

/// The file's token counts (example_samples.hpp: one per line, blank lines skipped), each up to
/// max_tokens; a file that is not one is bad input.
std::vector<sample> read_lengths(const std::string& path) {
    std::vector<std::size_t> counts;
    try {
        counts = bcl_examples::read_token_counts(path, max_tokens);
    } catch (const bcl_tools::length_file_error& e) {
        throw bad_input(e.what());
    }
    std::vector<sample> samples;
    samples.reserve(counts.size());
    for (const std::size_t count : counts)
        samples.push_back({samples.size(), static_cast<double>(count)});
    return samples;
}

/// argv[index] as a count (whole number), or `fallback` if it was not given.
std::size_t count_argument(int argc, char** argv, int index, const char* name,
                           std::size_t fallback) {
    if (argc <= index) return fallback;
    const std::optional<std::uint64_t> value = whole_number(argv[index], bcl::max_window_records);
    if (!value)
        throw bad_input(fmt::format("{} '{}' is not a whole number from 1 to {}", name, argv[index],
                                    bcl::max_window_records));
    return static_cast<std::size_t>(*value);
}

} // namespace

int main(int argc, char** argv) try {
    if (argc < 2 || argc > 4) {
        fmt::print(stderr, "usage: {} LENGTHS_FILE [BATCH_SIZE [LOOKAHEAD]]\n", argv[0]);
        return 2;
    }
    const bcl::options opt{.batch_size = count_argument(argc, argv, 2, "batch size", 16),
                           .lookahead = count_argument(argc, argv, 3, "lookahead", 8)};
    bcl::validate(opt); // a batch size or lookahead of 0 is a bcl::error, before any loop below
    std::vector<sample> samples = read_lengths(argv[1]);
    if (samples.size() < opt.batch_size)
        throw bad_input(fmt::format("{}: {} lengths, fewer than one batch of {}", argv[1],
                                    samples.size(), opt.batch_size));
    const auto cost = bcl::affine_quadratic(0.0, 1.0, 1.0 / 24576, &sample::tokens);

    // Before: consecutive full batches, in the file's order and in a shuffled epoch order (what
    // a plain loader with a shuffling sampler emits). The shuffle is a seeded Fisher-Yates over
    // std::mt19937_64, whose output the standard fixes, so it is the same everywhere.
    const auto plain_batches = [&](const std::vector<sample>& order) {
        bcl::running_stats stats;
        for (std::size_t first = 0; first + opt.batch_size <= order.size();
             first += opt.batch_size) {
            double batch_cost = 0;
            for (std::size_t i = first; i < first + opt.batch_size; ++i)
                batch_cost += cost(order[i]);
            stats.add(batch_cost);
        }
        return stats;
    };
    const bcl::running_stats file_order = plain_batches(samples);
    std::mt19937_64 random(2024);
    for (std::size_t i = samples.size() - 1; i > 0; --i)
        std::swap(samples[i], samples[random() % (i + 1)]);
    const bcl::running_stats before = plain_batches(samples);
    if (before.mean() <= 0.0)
        throw bad_input(
            fmt::format("{}: every length is 0, so there is no cost to balance", argv[1]));

    fmt::print("{} records, batch size {}, lookahead {} batches\n", samples.size(), opt.batch_size,
               opt.lookahead);
    fmt::print("{:<24}{:>14}{:>10}{:>10}{:>14}{:>11}\n", "", "mean cost", "cv", "cv red.",
               "max/mean", "max delay");
    fmt::print("{:<24}{:>14.1f}{:>10.4f}{:>10}{:>14.3f}{:>11}\n", "file order, no balancing",
               file_order.mean(), file_order.cv(), "", file_order.max() / file_order.mean(), 0);
    fmt::print("{:<24}{:>14.1f}{:>10.4f}{:>10}{:>14.3f}{:>11}\n", "shuffled, no balancing",
               before.mean(), before.cv(), "", before.max() / before.mean(), 0);

    // After: the same shuffled records through bcl, under each policy (sliding is the default),
    // and sliding once more aimed at the epoch's own mean cost rather than a running estimate;
    // the reduction is against the shuffled plain batches.
    struct variant {
        const char* name;
        bcl::options options;
    };
    bcl::options tumbling = opt;
    tumbling.policy = bcl::lookahead_policy::tumbling;
    bcl::options at_epoch_mean = opt;
    at_epoch_mean.mean_cost = bcl::stream_mean_cost(samples, cost, opt.cap);
    for (const auto& [name, options] :
         {variant{"bcl tumbling", tumbling}, variant{"bcl sliding (default)", opt},
          variant{"bcl sliding, epoch mean", at_epoch_mean}}) {
        auto batches = bcl::balance(samples, cost, options);
        for (auto&& batch : batches) (void)batch;
        const bcl::statistics& after = batches.balancer().stats();
        // No reduction to show when the plain batches already all cost the same.
        const std::string reduction =
            before.cv() > 0.0
                ? fmt::format("{:.1f}%", 100.0 * (1.0 - after.batch_cost.cv() / before.cv()))
                : "-";
        fmt::print("{:<24}{:>14.1f}{:>10.4f}{:>10}{:>14.3f}{:>11}\n", name, after.batch_cost.mean(),
                   after.batch_cost.cv(), reduction,
                   after.batch_cost.max() / after.batch_cost.mean(), after.max_delay_batches);
    }
    return 0;
} catch (const bad_input& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
} catch (const bcl::error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
} catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
}
