// detail/inner_sampler.hpp, as a specification: what bcl's samplers know of the libtorch sampler
// they wrap. inner_kind names libtorch's four stock samplers by their libtorch names and any other
// type (one derived from a stock sampler included) by "type " and its type_info name. A
// distributed sampler says its dataset size, share and start (libtorch's own rounding, up with
// duplicates, down without); other samplers say no size. detached_copy gives a copy to load()
// into that shares nothing load() overwrites, without drawing a random number. require_hands_out
// asks in chunks of at most 4096 and accepts exactly the expected indices; check_handed_out
// accepts a stock sampler exactly when it handed out the archive's pushed then staged indices
// this epoch (and none are left, if the epoch is said to be exhausted), and leaves it where it
// stood.

#include "../sampler_support.hpp"

#include <bcl/torch/detail/inner_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

namespace {

using namespace sampler_support;
namespace torch_detail = bcl::torch::detail;

struct derived_random : RandomSampler {
    using RandomSampler::RandomSampler;
};
struct derived_distributed : DistributedSequentialSampler {
    using DistributedSequentialSampler::DistributedSequentialSampler;
};

// Loads `archive` from what `sampler` saves.
template <class Sampler>
void saved_into(const Sampler& sampler, torch::serialize::InputArchive& archive) {
    std::istringstream stream(saved_bytes(sampler));
    archive.load_from(stream);
}

// A sampler that hands out `values` in order, at most `chunk` per next(n) (more than asked if
// `overfill`), logging every n it is asked for.
struct scripted {
    explicit scripted(index_batch v, std::size_t c = std::size_t{1} << 20, bool o = false)
        : values(std::move(v)), chunk(c), overfill(o) {}
    index_batch values;
    std::size_t chunk;
    bool overfill;
    std::vector<std::size_t> asked;
    std::size_t at = 0;
    torch::optional<index_batch> next(std::size_t n) {
        asked.push_back(n);
        if (at == values.size()) return torch::nullopt;
        const std::size_t take = std::min({overfill ? n + 1 : n, chunk, values.size() - at});
        index_batch out(values.begin() + static_cast<std::ptrdiff_t>(at),
                        values.begin() + static_cast<std::ptrdiff_t>(at + take));
        at += take;
        return out;
    }
};

index_batch iota_from(std::size_t first, std::size_t count) {
    index_batch out(count);
    for (std::size_t k = 0; k < count; ++k) out[k] = first + k;
    return out;
}

// The message require_hands_out gives for `inner`, expecting k at position k, or "".
std::string hands_out_failure(scripted& inner, std::size_t count) {
    try {
        torch_detail::require_hands_out(
            inner, count, [](std::size_t k) { return k; },
            [](const std::string& what) { throw bcl::error(what); });
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "";
}

// The message check_handed_out gives, or "".
template <class Inner>
std::string handed_out_failure(Inner& inner, const index_batch& pushed, const index_batch& staged,
                               bool exhausted, std::optional<std::size_t> dataset_size = {}) {
    torch::serialize::InputArchive saved;
    saved_into(inner, saved);
    try {
        torch_detail::check_handed_out("who", inner, saved, pushed, staged, exhausted,
                                       dataset_size);
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("inner_sampler: the stock samplers are named by their libtorch names; any other type, "
          "one derived from a stock sampler included, by its type_info name",
          "[torch][inner_sampler]") {
    REQUIRE(torch_detail::inner_kind<RandomSampler>() == "torch::data::samplers::RandomSampler");
    REQUIRE(torch_detail::inner_kind<SequentialSampler>() ==
            "torch::data::samplers::SequentialSampler");
    REQUIRE(torch_detail::inner_kind<DistributedRandomSampler>() ==
            "torch::data::samplers::DistributedRandomSampler");
    REQUIRE(torch_detail::inner_kind<DistributedSequentialSampler>() ==
            "torch::data::samplers::DistributedSequentialSampler");
    REQUIRE(torch_detail::inner_kind<derived_random>() ==
            std::string("type ") + typeid(derived_random).name());
    REQUIRE(torch_detail::inner_kind<derived_distributed>() !=
            torch_detail::inner_kind<derived_random>());

    STATIC_REQUIRE(torch_detail::stock_sampler<RandomSampler>);
    STATIC_REQUIRE(torch_detail::stock_sampler<SequentialSampler>);
    STATIC_REQUIRE(torch_detail::stock_sampler<DistributedRandomSampler>);
    STATIC_REQUIRE(torch_detail::stock_sampler<DistributedSequentialSampler>);
    STATIC_REQUIRE(!torch_detail::stock_sampler<derived_random>); // it may hand out other indices
    STATIC_REQUIRE(!torch_detail::stock_sampler<derived_distributed>);
}

TEST_CASE("inner_sampler: a distributed sampler says its dataset size, also after "
          "reset(new_size); RandomSampler and SequentialSampler say none",
          "[torch][inner_sampler]") {
    REQUIRE(torch_detail::dataset_size_of(DistributedRandomSampler(10, 3, 1)) == 10U);
    REQUIRE(torch_detail::dataset_size_of(derived_distributed(7, 2, 0)) == 7U);
    DistributedSequentialSampler s(25, 2, 0);
    REQUIRE(torch_detail::dataset_size_of(s) == 25U);
    s.reset(40);
    REQUIRE(torch_detail::dataset_size_of(s) == 40U);
    REQUIRE(!torch_detail::dataset_size_of(RandomSampler(10)).has_value());
    REQUIRE(!torch_detail::dataset_size_of(SequentialSampler(10)).has_value());
}

TEST_CASE("inner_sampler: a distributed sampler's share and start are those libtorch hands out: "
          "rounded up with duplicates, down without",
          "[torch][inner_sampler]") {
    // 10 indices over 3 ranks: with duplicates ceil(10/3) = 4 a rank, rank r from 4r; without,
    // floor(10/3) = 3 a rank, rank r from 3r.
    for (const bool duplicates : {true, false}) {
        const std::size_t share = duplicates ? 4 : 3;
        for (std::size_t rank = 0; rank < 3; ++rank) {
            CAPTURE(duplicates, rank);
            DistributedSequentialSampler seq(10, 3, rank, duplicates);
            DistributedRandomSampler rnd(10, 3, rank, duplicates);
            const torch_detail::distributed_view v = torch_detail::distributed_access::view(seq);
            REQUIRE(v.dataset_size == 10);
            REQUIRE(v.share == share);
            REQUIRE(v.begin == share * rank);
            REQUIRE(torch_detail::distributed_access::view(rnd).begin == share * rank);
            // libtorch agrees: each stands at its start and hands out its share.
            REQUIRE(seq.index() == v.begin);
            REQUIRE(rnd.index() == v.begin);
            REQUIRE(sorted_concat(drain(seq, 3)).size() == share);
            REQUIRE(sorted_concat(drain(rnd, 3)).size() == share);
        }
    }
}

TEST_CASE("inner_sampler: a RandomSampler's detached copy loads without touching the original, "
          "and making it draws no random number",
          "[torch][inner_sampler]") {
    // The original's permutation, from a twin seeded alike.
    torch::manual_seed(1);
    RandomSampler twin(20);
    const index_batch permutation = *twin.next(20);
    torch::manual_seed(1);
    RandomSampler original(20);
    (void)original.next(5);
    // Another sampler's archive to load.
    torch::manual_seed(2);
    RandomSampler other(20);
    (void)other.next(8);
    torch::serialize::InputArchive archive;
    saved_into(other, archive);

    torch::manual_seed(9);
    RandomSampler copy = torch_detail::detached_copy(original);
    const torch::Tensor after_copy = torch::randint(1000000, {4}, torch::kInt64);
    torch::manual_seed(9);
    REQUIRE(torch::equal(after_copy, torch::randint(1000000, {4}, torch::kInt64)));

    copy.load(archive);
    REQUIRE(*copy.next(12) == *RandomSampler(other).next(12)); // other's rest
    REQUIRE(*original.next(15) ==
            index_batch(permutation.begin() + 5, permutation.end())); // untouched

    // Why: a plain copy shares the permutation, which load() overwrites in place.
    torch::manual_seed(1);
    RandomSampler victim(20);
    (void)victim.next(5);
    RandomSampler plain(victim);
    plain.load(archive);
    REQUIRE(*victim.next(15) != index_batch(permutation.begin() + 5, permutation.end()));

    // Any other sampler is copied as it stands.
    SequentialSampler seq(10);
    (void)seq.next(3);
    REQUIRE(*torch_detail::detached_copy(seq).next(2) == index_batch{3, 4});
}

TEST_CASE("inner_sampler: require_hands_out asks in chunks of at most 4096 and accepts exactly the "
          "expected indices",
          "[torch][inner_sampler]") {
    scripted whole{iota_from(0, 10000)};
    REQUIRE(hands_out_failure(whole, 10000).empty());
    REQUIRE(whole.asked == std::vector<std::size_t>{4096, 4096, 1808});

    scripted by_three{iota_from(0, 10), 3};
    REQUIRE(hands_out_failure(by_three, 10).empty()); // fewer than asked is fine
    REQUIRE(by_three.asked == std::vector<std::size_t>{10, 7, 4, 1});

    scripted none{iota_from(0, 5)};
    REQUIRE(hands_out_failure(none, 0).empty());
    REQUIRE(none.asked.empty());

    scripted wrong{iota_from(0, 10)};
    wrong.values[5] = 99;
    REQUIRE(hands_out_failure(wrong, 10) == "it hands out 99 at position 5, not 5");
    scripted few{iota_from(0, 7)};
    REQUIRE(hands_out_failure(few, 10) == "it hands out 7 indices, not 10");
    scripted over{iota_from(0, 10), std::size_t{1} << 20, true};
    REQUIRE(hands_out_failure(over, 4) == "it hands out 0 indices, not 4");
}

TEST_CASE("inner_sampler: check_handed_out accepts a sequential sampler that handed out exactly "
          "the pushed then the staged indices, and leaves it where it stood",
          "[torch][inner_sampler]") {
    SequentialSampler seq(10);
    (void)seq.next(4); // 0 1 2 3
    REQUIRE(handed_out_failure(seq, {0, 1}, {2, 3}, false).empty());
    REQUIRE(handed_out_failure(seq, {}, {0, 1, 2, 3}, false).empty());
    REQUIRE(*seq.next(1) == index_batch{4});

    SequentialSampler done(6);
    (void)done.next(6);
    REQUIRE(handed_out_failure(done, {0, 1, 2}, {3, 4, 5}, true).empty());

    // Rank 1 of 2 over 10: 5 6 7 8 9.
    DistributedSequentialSampler rank1(10, 2, 1);
    (void)rank1.next(3);
    REQUIRE(handed_out_failure(rank1, {5}, {6, 7}, false).empty());
    REQUIRE(*rank1.next(1) == index_batch{8});
}

TEST_CASE("inner_sampler: check_handed_out refuses another order, another count and indices left "
          "in an exhausted epoch, naming the archive's fields",
          "[torch][inner_sampler]") {
    SequentialSampler seq(10);
    (void)seq.next(4);
    const std::string swapped = handed_out_failure(seq, {0, 1}, {3, 2}, false);
    REQUIRE_THAT(swapped, Contains("who: the archive's bcl_pushed and bcl_staged (2 and 2 "
                                   "indices) are not what its inner sampler handed out"));
    REQUIRE_THAT(swapped, Contains("it hands out 2 at position 2, not 3"));
    REQUIRE_THAT(handed_out_failure(seq, {0, 1, 2}, {3, 4}, false),
                 Contains("it has handed out 4 (its index() is 4, its epoch began at 0)"));
    // A SequentialSampler keeps its size private: one index more tells that some are left, not
    // how many (6 here), so the message gives no count.
    REQUIRE_THAT(handed_out_failure(seq, {0, 1}, {2, 3}, true),
                 Contains("the epoch is drawn whole or over, but its inner sampler has indices "
                          "left") &&
                     !Contains("of its indices are left"));

    DistributedSequentialSampler rank1(10, 2, 1);
    (void)rank1.next(3);
    REQUIRE_THAT(handed_out_failure(rank1, {5, 6, 7}, {}, true),
                 Contains("2 of its indices are left"));
    REQUIRE_THAT(handed_out_failure(rank1, {0, 1, 2}, {}, false),
                 Contains("it hands out 5 at position 0, not 0"));
}

TEST_CASE("inner_sampler: check_handed_out reads a RandomSampler's saved permutation: its first "
          "indices are those handed out, all within a known dataset size",
          "[torch][inner_sampler]") {
    torch::manual_seed(4);
    const index_batch permutation = *RandomSampler(12).next(12);
    torch::manual_seed(4);
    RandomSampler rnd(12);
    (void)rnd.next(5);
    const index_batch first5(permutation.begin(), permutation.begin() + 5);
    const index_batch pushed(first5.begin(), first5.begin() + 2);
    const index_batch staged(first5.begin() + 2, first5.end());
    REQUIRE(handed_out_failure(rnd, pushed, staged, false, 12).empty());
    index_batch reordered = staged;
    std::swap(reordered[0], reordered[1]);
    REQUIRE_THAT(handed_out_failure(rnd, pushed, reordered, false),
                 Contains("its permutation holds " + std::to_string(staged[0]) +
                          " at position 2, not " + std::to_string(staged[1])));
    // The permutation of 12 holds 11: outside a dataset of 11.
    REQUIRE_THAT(handed_out_failure(rnd, pushed, staged, false, 11),
                 Contains("its permutation holds 11, outside the dataset"));
    REQUIRE_THAT(handed_out_failure(rnd, pushed, staged, true),
                 Contains("7 of its indices are left"));
    // Checked, it stands where it stood.
    REQUIRE(*rnd.next(7) == index_batch(permutation.begin() + 5, permutation.end()));
}
