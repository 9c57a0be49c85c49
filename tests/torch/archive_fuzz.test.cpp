// The archive fuzzer: thousands of seeded trials, each a genuine archive of
// bcl::torch::balanced_sampler whose bcl_ fields are mutated at random (a value changed, an entry
// dropped, inserted, duplicated or swapped, a field truncated or swapped for another archive's),
// half of them with the digest recomputed. Every trial must end in a bcl::error that leaves the
// sampler as it was, or in a load whose resumed epoch, with the batches handed out before the
// save, holds every index of the epoch exactly once in the right number and sizes of batches.

#include "sampler_support.hpp"

#include <bcl/bcl.hpp>
#include <bcl/torch/balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace sampler_support;
using rng_type = std::mt19937_64;

// How the trials ended.
struct fuzz_counts {
    std::size_t trials = 0;
    std::size_t refused = 0;         // a bcl::error, the sampler unchanged
    std::size_t accepted = 0;        // loaded, and the epoch came out right
    std::size_t accepted_same = 0;   // of these, with every field but the digest as saved
    std::size_t refused_changed = 0; // a bcl::error, but the sampler changed
    std::size_t accepted_wrong = 0;  // loaded, and the epoch came out wrong
    std::size_t other_error = 0;     // anything but a bcl::error
    std::map<std::string, std::size_t> by_field; // refusals, by the field the message names first
    std::vector<std::string> failures;           // what the first wrong outcomes were
};

// A genuine archive, and what the epoch it is in hands out.
struct genuine_archive {
    bcl::options opt;
    archive_parts parts;
    std::vector<index_batch> handed; // before the save
    index_batch epoch;               // every index of the epoch, sorted
    std::size_t batches = 0;         // the epoch's batches
};

std::size_t below(rng_type& rng, std::size_t n) {
    return n == 0 ? 0 : rng() % n;
}

// A value for an index field: next to one in it, anywhere in or past the dataset, one of
// another archive's, or negative.
std::int64_t some_index(rng_type& rng, const int64s& v, const int64s& donor, std::int64_t n) {
    switch (below(rng, 6)) {
    case 0:
        return v.empty() ? 0 : v[below(rng, v.size())] + 1;
    case 1:
        return v.empty() ? 0 : v[below(rng, v.size())] - 1;
    case 2:
        return static_cast<std::int64_t>(below(rng, 2 * static_cast<std::size_t>(n)));
    case 3:
        return donor.empty() ? n : donor[below(rng, donor.size())];
    case 4:
        return -1 - static_cast<std::int64_t>(below(rng, 3));
    default:
        return v.empty() ? 0 : v[below(rng, v.size())];
    }
}

// One random edit of a list of values: change, drop, insert, duplicate or swap entries,
// truncate, or take `donor` whole. `value` gives a new value.
template <class T, class Value>
std::vector<T> edited(std::vector<T> v, const std::vector<T>& donor, rng_type& rng,
                      const Value& value) {
    std::size_t op = below(rng, 7);
    if (v.empty() && op != 2 && op != 6) op = 2;
    const std::size_t i = below(rng, v.size());
    const std::size_t j = below(rng, v.size());
    switch (op) {
    case 0:
        v[i] = value();
        break;
    case 1:
        v.erase(v.begin() + std::ptrdiff_t(i));
        break;
    case 2: { // the position first: the order of a call's arguments is unspecified
        const auto at = static_cast<std::ptrdiff_t>(below(rng, v.size() + 1));
        v.insert(v.begin() + at, value());
        break;
    }
    case 3:
        v.insert(v.begin() + std::ptrdiff_t(i), T(v[i]));
        break;
    case 4:
        std::swap(v[i], v[j]);
        break;
    case 5:
        v.resize(below(rng, v.size()));
        break;
    default:
        v = donor;
        break;
    }
    return v;
}

template <class T>
std::vector<T> values_of(const torch::Tensor& t) {
    const torch::Tensor c = t.contiguous();
    return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

template <class T>
torch::Tensor tensor_of(const std::vector<T>& v, torch::ScalarType dtype) {
    torch::Tensor t = torch::empty({static_cast<std::int64_t>(v.size())}, dtype);
    std::copy(v.begin(), v.end(), t.data_ptr<T>());
    return t;
}

// `t` (a field) edited at random; `donor` is the same field of another archive.
torch::Tensor mutated(const torch::Tensor& t, const torch::Tensor& donor, rng_type& rng,
                      std::int64_t n) {
    if (t.scalar_type() == torch::kInt64) {
        const int64s v = values_of<std::int64_t>(t);
        const int64s d = values_of<std::int64_t>(donor);
        return tensor_of(edited(v, d, rng, [&] { return some_index(rng, v, d, n); }),
                         torch::kInt64);
    }
    if (t.scalar_type() == torch::kUInt8) {
        const auto v = values_of<std::uint8_t>(t);
        return tensor_of(edited(v, values_of<std::uint8_t>(donor), rng,
                                [&] { return static_cast<std::uint8_t>(below(rng, 256)); }),
                         torch::kUInt8);
    }
    const std::vector<double> v = values_of<double>(t);
    const std::array<double, 5> odd{0.0, -1.0, std::nan(""), 1e300, 1500.0};
    return tensor_of(edited(v, values_of<double>(donor), rng,
                            [&] {
                                return below(rng, 2) == 0 && !v.empty()
                                           ? v[0] * (1.0 + 1e-9 * double(1 + below(rng, 1000)))
                                           : odd[below(rng, odd.size())];
                            }),
                     torch::kFloat64);
}

// The field a refusal names first ("the archive's X ...").
std::string named_field(const std::string& what) {
    const std::string marker = "the archive's ";
    const std::size_t at = what.find(marker);
    if (at == std::string::npos) return "(none)";
    const std::size_t from = at + marker.size();
    return what.substr(from, what.find_first_of(" :(", from) - from);
}

// The fields a trial picks from, the index lists more often.
const std::vector<std::string>& field_choices() {
    static const std::vector<std::string> keys{
        "bcl_pushed", "bcl_pushed",        "bcl_pushed",       "bcl_staged",     "bcl_staged",
        "bcl_staged", "bcl_pending",       "bcl_pending",      "bcl_pending",    "bcl_epoch",
        "bcl_draw",   "bcl_mean_cost",     "bcl_dataset_size", "bcl_inner_kind", "bcl_format",
        "bcl_digest", "bcl_balancer_state"};
    return keys;
}

// `trials` trials over the genuine archives of samplers that `make(opt)` makes over `n` dataset
// indices, seeded from `seed`.
template <class Make>
void fuzz(const Make& make, std::int64_t n, std::size_t trials, std::uint64_t seed,
          fuzz_counts& counts) {
    std::vector<genuine_archive> pool;
    for (const bcl::lookahead_policy policy :
         {bcl::lookahead_policy::sliding, bcl::lookahead_policy::tumbling})
        for (const double mean_cost : {0.0, 400.0}) {
            const bcl::options opt{
                .batch_size = 8, .lookahead = 2, .policy = policy, .mean_cost = mean_cost};
            const std::array<std::pair<std::size_t, std::size_t>, 6> points{
                {{0, 0}, {2, 0}, {5, 0}, {11, 0}, {1000, 0}, {3, 1}}};
            for (const auto& [taken, epochs] : points) {
                const saved_point p = save_after(make(opt), taken, epochs);
                genuine_archive g{opt, archive_parts::of(p.bytes), p.handed, {}, 0};
                std::vector<index_batch> all = p.handed;
                all.insert(all.end(), p.rest.begin(), p.rest.end());
                g.epoch = sorted_concat(all);
                g.batches = all.size();
                pool.push_back(std::move(g));
            }
        }
    for (std::size_t t = 0; t < trials; ++t) {
        rng_type rng(seed + t);
        const genuine_archive& g = pool[below(rng, pool.size())];
        // Edits that change nothing (a field swapped for an equal one) are drawn again, a few
        // times; `same` says whether every field but the digest is still as saved.
        archive_parts parts;
        bool same = true;
        for (std::size_t attempt = 0; same && attempt < 8; ++attempt) {
            parts = g.parts;
            const std::size_t edits = below(rng, 10) < 7 ? 1 : 2;
            for (std::size_t e = 0; e < edits; ++e) {
                const std::string& key = field_choices()[below(rng, field_choices().size())];
                const genuine_archive& donor = pool[below(rng, pool.size())];
                parts.fields[key] =
                    mutated(parts.fields.at(key), donor.parts.fields.at(key), rng, n);
            }
            for (const auto& [key, field] : parts.fields) {
                const torch::Tensor& was = g.parts.fields.at(key);
                same = same && (key == "bcl_digest" || (field.scalar_type() == was.scalar_type() &&
                                                        torch::equal(field, was)));
            }
        }
        const bool reseal = below(rng, 2) == 0;
        const std::string bytes = parts.bytes(reseal);

        auto target = make(g.opt);
        auto twin = make(g.opt);
        move_elsewhere(target);
        move_elsewhere(twin);
        ++counts.trials;
        const std::string trial = "trial " + std::to_string(seed + t);
        try {
            load_bytes(target, bytes);
        } catch (const bcl::error& e) {
            ++counts.by_field[named_field(e.what())];
            if (same_course(target, twin)) {
                ++counts.refused;
            } else {
                ++counts.refused_changed;
                counts.failures.push_back(trial + ": refused, but changed: " + e.what());
            }
            continue;
        } catch (const std::exception& e) {
            ++counts.other_error;
            counts.failures.push_back(trial + ": not a bcl::error: " + e.what());
            continue;
        }
        std::vector<index_batch> all = g.handed;
        for (index_batch& x : drain(target, g.opt.batch_size)) all.push_back(std::move(x));
        bool right = all.size() == g.batches && sorted_concat(all) == g.epoch;
        for (std::size_t k = 0; k + 1 < all.size(); ++k)
            right = right && all[k].size() == g.opt.batch_size;
        if (right) {
            ++counts.accepted;
            counts.accepted_same += same ? 1 : 0;
        } else {
            ++counts.accepted_wrong;
            counts.failures.push_back(trial + ": accepted, and the epoch came out wrong");
        }
    }
}

} // namespace

TEST_CASE("torch archive fuzzer: randomly altered archives are refused without a change, or "
          "resume an epoch that hands out every index once in exact batches",
          "[torch][resume][tamper][fuzz]") {
    const std::vector<std::size_t> lengths = make_lengths(400);
    const auto cost = length_cost(lengths);
    constexpr std::size_t per_kind = 500; // x 4 inner samplers
    fuzz_counts counts;
    const auto start = std::chrono::steady_clock::now();
    fuzz(
        [&](const bcl::options& opt) {
            return bcl::torch::balanced_sampler(DistributedRandomSampler(300, 2, 1), cost, opt);
        },
        300, per_kind, 1'000'000, counts);
    fuzz(
        [&](const bcl::options& opt) {
            return bcl::torch::balanced_sampler(DistributedSequentialSampler(301, 2, 1), cost, opt);
        },
        301, per_kind, 2'000'000, counts);
    fuzz(
        [&](const bcl::options& opt) {
            return bcl::torch::balanced_sampler(SequentialSampler(150), cost, opt, 150);
        },
        150, per_kind, 3'000'000, counts);
    fuzz(
        [&](const bcl::options& opt) {
            torch::manual_seed(17);
            return bcl::torch::balanced_sampler(RandomSampler(150), cost, opt, 150);
        },
        150, per_kind, 4'000'000, counts);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    std::printf("archive fuzzer: %zu trials in %.1f s: %zu refused (sampler unchanged), %zu "
                "accepted (epoch right; %zu of them with every field but the digest as saved); "
                "%zu refused but changed, %zu accepted and wrong, %zu not a bcl::error\n"
                "  refusals by the field named first:",
                counts.trials, seconds, counts.refused, counts.accepted, counts.accepted_same,
                counts.refused_changed, counts.accepted_wrong, counts.other_error);
    for (const auto& [field, k] : counts.by_field) std::printf(" %s %zu,", field.c_str(), k);
    std::printf("\n");
    for (std::size_t k = 0; k < std::min<std::size_t>(counts.failures.size(), 10); ++k)
        std::printf("  %s\n", counts.failures[k].c_str());
    CHECK(counts.refused_changed == 0);
    CHECK(counts.accepted_wrong == 0);
    CHECK(counts.other_error == 0);
    REQUIRE(counts.refused + counts.accepted == counts.trials);
    REQUIRE(counts.refused > counts.trials / 2); // the mutations do reach the checks
}
