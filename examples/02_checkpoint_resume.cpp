// This example demonstrates exact resume: a training loop checkpoints its bcl::balancer to a file
// every 50 batches, "crashes" partway through the epoch, restores from the last checkpoint and
// finishes; the batches it trained on equal those of an uninterrupted run. Records are not
// serialized themselves: the checkpoint stores their dataset indices, the way a real loader would.
// Requires: a lengths file (argv[1]) of at least 1025 records (65 batches: the crash comes after
// the first checkpoint), e.g. bench/workloads/gsm8k_train_llama3_tokens.txt.
// Bad input (a file it cannot read, a line that is not a token count, too few records) ends it
// with one line on stderr that names the file, the line and the value, and exit code 2.

#include "example_samples.hpp"

#include <bcl/bcl.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

struct sample {
    std::size_t index;                // position in the dataset: all a checkpoint needs
    std::vector<std::int32_t> tokens; // stands for the real payload, rebuilt from the index
};

using cost_model = bcl::affine_quadratic_cost<double (*)(const sample&)>;
using balancer = bcl::balancer<sample, cost_model>;

double token_count(const sample& s) {
    return static_cast<double>(s.tokens.size());
}

/// A checkpoint every this many batches.
constexpr std::size_t checkpoint_every = 50;

/// The batch the run "crashes" after, in an epoch of `batches` batches.
constexpr std::size_t crash_point(std::size_t batches) {
    return batches * 2 / 3 + 7;
}

/// The fewest batches an epoch may have for the crash to come after the first checkpoint and
/// before the end of the epoch.
constexpr std::size_t fewest_batches() {
    std::size_t batches = 1;
    while (crash_point(batches) < checkpoint_every || crash_point(batches) >= batches) ++batches;
    return batches;
}

/// Input this program cannot use: exit code 2.
struct bad_input : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// The longest record: 2^24 tokens, more than any context window. Every record here holds its
/// tokens, so a runaway length would be gigabytes of memory rather than an error message.
constexpr std::uint64_t max_tokens = std::uint64_t{1} << 24;

/// The file's token counts (example_samples.hpp: one per line, blank lines skipped), each up to
/// max_tokens; a file that is not one is bad input.
std::vector<std::size_t> read_lengths(const std::string& path) {
    try {
        return bcl_examples::read_token_counts(path, max_tokens);
    } catch (const bcl_tools::length_file_error& e) {
        throw bad_input(e.what());
    }
}

sample load(const std::vector<std::size_t>& lengths, std::size_t index) {
    return {index, std::vector<std::int32_t>(lengths[index], 1)};
}

// Checkpoint file: the state's bytes, then the dataset indices of the pending records.
void write_checkpoint(const std::filesystem::path& file, const balancer& b) {
    const balancer::state st = b.save();
    const std::string bytes = st.to_bytes();
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << bytes.size() << ' ' << st.pending.size() << '\n';
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    for (const sample& s : st.pending) out << ' ' << s.index;
    if (!out) throw std::runtime_error("cannot write " + file.string());
}

balancer::state read_checkpoint(const std::filesystem::path& file,
                                const std::vector<std::size_t>& lengths) {
    std::ifstream in(file, std::ios::binary);
    std::size_t size = 0;
    std::size_t pending = 0;
    in >> size >> pending;
    in.get();
    std::string bytes(size, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    std::vector<sample> records;
    for (std::size_t i = 0, index = 0; i < pending && in >> index; ++i)
        records.push_back(load(lengths, index));
    if (!in) throw std::runtime_error("checkpoint " + file.string() + " is unreadable");
    return balancer::state::from_bytes(bytes, std::move(records));
}

struct run_log {
    std::vector<std::vector<std::size_t>> batches; // dataset indices, batch by batch
    std::size_t next_record = 0;                   // the sampler's position
};

void train_on(run_log& log, balancer::batch_type batch) {
    std::vector<std::size_t>& ids = log.batches.emplace_back();
    for (const sample& s : batch) ids.push_back(s.index);
}

// Runs until the end of the epoch, or until `crash_at` batches were trained on.
bool run(run_log& log, balancer& b, const std::vector<std::size_t>& lengths, std::size_t crash_at,
         const std::filesystem::path& checkpoint) {
    const auto step = [&](balancer::batch_type batch) {
        train_on(log, batch);
        if (log.batches.size() % checkpoint_every == 0) {
            write_checkpoint(checkpoint, b);
            std::ofstream(checkpoint.string() + ".pos")
                << log.next_record << ' ' << log.batches.size();
        }
        return log.batches.size() != crash_at;
    };
    for (; log.next_record < lengths.size();) {
        b.push(load(lengths, log.next_record++));
        while (auto batch = b.pop())
            if (!step(*batch)) return false;
    }
    b.finish();
    while (auto batch = b.pop())
        if (!step(*batch)) return false;
    return true;
}

} // namespace

int main(int argc, char** argv) try {
    if (argc < 2) {
        fmt::print(stderr, "usage: {} LENGTHS_FILE\n", argv[0]);
        return 2;
    }
    const std::vector<std::size_t> lengths = read_lengths(argv[1]);
    const bcl::options opt{
        .batch_size = 16, .lookahead = 8, .seed = 42, .policy = bcl::lookahead_policy::sliding};
    const cost_model cost{0.0, 1.0, 1.0 / 24576, &token_count};
    const auto checkpoint = std::filesystem::temp_directory_path() / "bcl_example_checkpoint";
    const auto unused = std::filesystem::path(checkpoint.string() + ".unused");

    // The batch count is ceil(N / B) whatever the costs: the crash point is known up front, and
    // it must come after the first checkpoint and before the end of the epoch.
    const std::size_t batch_count = (lengths.size() + opt.batch_size - 1) / opt.batch_size;
    const std::size_t crash_at = crash_point(batch_count);
    if (batch_count < fewest_batches())
        throw bad_input(fmt::format("{}: {} lengths make {} batches of {}; this example needs at "
                                    "least {} batches, to crash after its first checkpoint",
                                    argv[1], lengths.size(), batch_count, opt.batch_size,
                                    fewest_batches()));

    run_log reference;
    balancer whole{cost, opt};
    run(reference, whole, lengths, 0, unused);

    run_log resumed;
    {
        balancer first{cost, opt};
        if (run(resumed, first, lengths, crash_at, checkpoint))
            throw std::runtime_error("the run was meant to crash");
    }
    fmt::print("crashed after {} batches; ", resumed.batches.size());

    std::size_t saved_batches = 0;
    std::ifstream(checkpoint.string() + ".pos") >> resumed.next_record >> saved_batches;
    resumed.batches.resize(saved_batches); // the work after the checkpoint is lost with the crash
    balancer restored{cost, opt, read_checkpoint(checkpoint, lengths)};
    fmt::print("restored the checkpoint taken at batch {} (sampler at record {})\n", saved_batches,
               resumed.next_record);
    run(resumed, restored, lengths, 0, checkpoint);

    std::vector<std::size_t> seen(lengths.size(), 0);
    for (const auto& batch : resumed.batches)
        for (const std::size_t index : batch) ++seen[index];
    const bool once = std::all_of(seen.begin(), seen.end(), [](std::size_t n) { return n == 1; });
    const bool same = once && resumed.batches == reference.batches;
    fmt::print("{} batches resumed, {} uninterrupted: {}\n", resumed.batches.size(),
               reference.batches.size(),
               same ? "identical batches, every record exactly once" : "DIFFERENT");
    for (const auto& file : {checkpoint, unused})
        for (const auto& path : {file, std::filesystem::path(file.string() + ".pos")})
            std::filesystem::remove(path);
    return same ? 0 : 1;
} catch (const bad_input& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
} catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
}
