#pragma once
// What bcl's libtorch samplers know about the index sampler they wrap: a stable name for its
// kind, the dataset size where the sampler says it, and, for libtorch's four stock samplers,
// whether a loaded one has handed out exactly the indices an archive claims. Needs libtorch's
// C++ API on the include path; without it this header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#if __has_include(<torch/data/samplers/base.h>)

#include <torch/data/samplers/distributed.h>
#include <torch/data/samplers/random.h>
#include <torch/data/samplers/sequential.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <vector>

namespace bcl::torch::detail {

namespace samplers = ::torch::data::samplers;

/// A name for the kind of an inner sampler, saved in archives so that one of another kind is
/// refused: stable across builds for libtorch's four stock samplers, and for any other type its
/// std::type_info name (stable within one build and compiler).
template <class Inner>
[[nodiscard]] std::string inner_kind() {
    if constexpr (std::same_as<Inner, samplers::RandomSampler>)
        return "torch::data::samplers::RandomSampler";
    else if constexpr (std::same_as<Inner, samplers::SequentialSampler>)
        return "torch::data::samplers::SequentialSampler";
    else if constexpr (std::same_as<Inner, samplers::DistributedRandomSampler>)
        return "torch::data::samplers::DistributedRandomSampler";
    else if constexpr (std::same_as<Inner, samplers::DistributedSequentialSampler>)
        return "torch::data::samplers::DistributedSequentialSampler";
    else
        return std::string("type ") + typeid(Inner).name();
}

/// The dataset size, the per-rank share and this rank's start of a distributed sampler.
struct distributed_view {
    std::size_t dataset_size; // what it draws from (its size_)
    std::size_t share;        // indices per rank and epoch (its local_sample_count())
    std::size_t begin;        // where this rank's share starts: index() at an epoch's start
};

/// Reads DistributedSampler<>'s protected fields through pointers to members, which a class
/// derived from it may form (`&distributed_access::size_` is a `std::size_t
/// DistributedSampler<>::*`) and which apply to any DistributedSampler<>: ordinary, legal C++.
/// Never instantiated.
struct distributed_access : samplers::DistributedSampler<> {
    [[nodiscard]] static distributed_view view(const samplers::DistributedSampler<>& s) noexcept {
        const std::size_t n = s.*(&distributed_access::size_);
        const std::size_t replicas =
            std::max<std::size_t>(s.*(&distributed_access::num_replicas_), 1);
        // As local_sample_count(), which is not const.
        const std::size_t share = s.*(&distributed_access::allow_duplicates_)
                                      ? (n + replicas - 1) / replicas
                                      : n / replicas;
        return {n, share, s.*(&distributed_access::rank_) * share};
    }
};

/// The dataset size `inner` draws from, where it says: a DistributedSampler's size (what its
/// constructor or reset(new_size) was given). std::nullopt for every other sampler, libtorch's
/// RandomSampler and SequentialSampler included: they keep their size private.
template <class Inner>
[[nodiscard]] std::optional<std::size_t> dataset_size_of(const Inner& inner) noexcept {
    if constexpr (std::derived_from<Inner, samplers::DistributedSampler<>>)
        return distributed_access::view(inner).dataset_size;
    else
        return std::nullopt;
}

/// libtorch's four stock samplers, whose index() and archives this header knows: a type derived
/// from one of them may hand out other indices, so it is not one of these.
template <class Inner>
concept stock_sampler = std::same_as<Inner, samplers::RandomSampler> ||
    std::same_as<Inner, samplers::SequentialSampler> ||
    std::same_as<Inner, samplers::DistributedRandomSampler> ||
    std::same_as<Inner, samplers::DistributedSequentialSampler>;

/// A copy of `inner` to load() into, sharing nothing that load() changes in place. The copy of
/// a RandomSampler (or of a type derived from one) shares its permutation tensor, which its
/// load() overwrites in place (Tensor::set_), so the copy first gets a fresh one of its own:
/// RandomSampler::reset(0), called as such, which draws no random number. Any other sampler is
/// copied as it is: one that holds a tensor its load() overwrites in place is not isolated.
template <std::copy_constructible Inner>
[[nodiscard]] Inner detached_copy(const Inner& inner) {
    Inner copy(inner);
    if constexpr (std::derived_from<Inner, samplers::RandomSampler>)
        copy.samplers::RandomSampler::reset(0);
    return copy;
}

/// Calls `fail` unless `inner`, asked for indices in chunks, hands out exactly `count` indices,
/// the k-th being `expected(k)`. O(count).
template <class Inner, class Expected, class Fail>
void require_hands_out(Inner& inner, std::size_t count, const Expected& expected,
                       const Fail& fail) {
    for (std::size_t k = 0; k < count;) {
        const std::size_t ask = std::min<std::size_t>(count - k, 4096);
        const ::torch::optional<std::vector<std::size_t>> got = inner.next(ask);
        if (!got || got->empty() || got->size() > ask)
            fail("it hands out " + std::to_string(k) + " indices, not " + std::to_string(count));
        for (const std::size_t index : *got) {
            if (index != expected(k))
                fail("it hands out " + std::to_string(index) + " at position " + std::to_string(k) +
                     ", not " + std::to_string(expected(k)));
            ++k;
        }
    }
}

/// Throws bcl::error (prefixed with `who`) unless `inner`, a stock sampler just loaded from
/// `saved` (its nested archive), has handed out exactly `pushed` then `staged` this epoch, and,
/// if `exhausted`, has no index left. The count is its index() (minus its share's start for a
/// distributed sampler). The order is checked by asking it again from its epoch's start: reset()
/// keeps its size and epoch, so it hands out the same indices again, and once checked it stands
/// where load() left it. A RandomSampler's reset() would draw a new permutation, so for it the
/// saved permutation is checked instead: its first indices are `pushed` and `staged`, all are
/// distinct, non-negative and below `dataset_size` if that is known, and a copy of `inner` hands
/// out the rest of it (which also catches a permutation of another element type, which its
/// load() would misread). O(dataset) for a DistributedRandomSampler (its reset() shuffles the
/// whole dataset again), O(n log n) for a RandomSampler of n indices, O(drawn) otherwise.
template <stock_sampler Inner>
void check_handed_out(const std::string& who, Inner& inner, ::torch::serialize::InputArchive& saved,
                      std::span<const std::size_t> pushed, std::span<const std::size_t> staged,
                      bool exhausted, std::optional<std::size_t> dataset_size) {
    const std::size_t drawn = pushed.size() + staged.size();
    const auto at = [&](std::size_t k) {
        return k < pushed.size() ? pushed[k] : staged[k - pushed.size()];
    };
    const auto fail = [&](const std::string& what) {
        throw bcl::error(who + ": the archive's bcl_pushed and bcl_staged (" +
                         std::to_string(pushed.size()) + " and " + std::to_string(staged.size()) +
                         " indices) are not what its inner sampler handed out this epoch: " + what);
    };
    std::size_t start = 0;            // index() at the epoch's start
    std::optional<std::size_t> total; // the epoch's indices, where known
    if constexpr (std::derived_from<Inner, samplers::DistributedSampler<>>) {
        const distributed_view v = distributed_access::view(inner);
        start = v.begin;
        total = v.share;
    }
    if (inner.index() < start || inner.index() - start != drawn)
        fail((inner.index() < start
                  ? std::string("it stands before its epoch's start")
                  : "it has handed out " + std::to_string(inner.index() - start)) +
             " (its index() is " + std::to_string(inner.index()) + ", its epoch began at " +
             std::to_string(start) + ")");
    if constexpr (std::same_as<Inner, samplers::RandomSampler>) {
        c10::IValue value;
        if (!saved.try_read("indices", value) || !value.isTensor())
            fail("its archive has no tensor \"indices\"");
        ::torch::Tensor perm = value.toTensor();
        if (perm.dim() != 1 || !perm.device().is_cpu() ||
            !::c10::isIntegralType(perm.scalar_type(), /*includeBool=*/false))
            fail("its \"indices\" are not a 1-d CPU tensor of integers");
        perm = perm.to(::torch::kInt64).contiguous();
        const auto* p = perm.data_ptr<std::int64_t>();
        const auto n = static_cast<std::size_t>(perm.numel());
        std::vector<std::int64_t> sorted(p, p + n);
        std::sort(sorted.begin(), sorted.end());
        if (n != 0 && (sorted.front() < 0 || (dataset_size && static_cast<std::uint64_t>(
                                                                  sorted.back()) >= *dataset_size)))
            fail("its permutation holds " +
                 std::to_string(sorted.front() < 0 ? sorted.front() : sorted.back()) +
                 ", outside the dataset");
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
            fail("its permutation holds an index twice");
        if (n < drawn) fail("its permutation has only " + std::to_string(n) + " indices");
        for (std::size_t k = 0; k < drawn; ++k)
            if (static_cast<std::size_t>(p[k]) != at(k))
                fail("its permutation holds " + std::to_string(p[k]) + " at position " +
                     std::to_string(k) + ", not " + std::to_string(at(k)));
        Inner ahead(inner); // shares the permutation, which next() only reads
        require_hands_out(
            ahead, n - drawn, [&](std::size_t k) { return static_cast<std::size_t>(p[drawn + k]); },
            fail);
        total = n;
    } else {
        inner.reset();
        require_hands_out(inner, drawn, at, fail);
    }
    if (!exhausted) return;
    if (!total) { // a SequentialSampler keeps its size private: one index more tells, not how many
        const ::torch::optional<std::vector<std::size_t>> more = inner.next(1);
        if (more && !more->empty())
            fail("the epoch is drawn whole or over, but its inner sampler has indices left");
        return;
    }
    if (*total != drawn)
        fail("the epoch is drawn whole or over, but " + std::to_string(*total - drawn) +
             " of its indices are left");
}

} // namespace bcl::torch::detail

#endif
