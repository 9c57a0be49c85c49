// bcl::detail::plan::word_sort, as a specification: words that pack a key above `low_bits` bits of
// a distinct index come out in the order std::sort gives them, whatever the keys (narrow, wide,
// all equal, sharing bytes), the size (at and around the small-input cut) and the low bits.

#include <bcl/detail/plan/word_sort.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

/// n words (key << low_bits | i): the index i below, in ascending order as the contract asks,
/// and a key of `key_bits` random bits above, with `shared` set in every key.
std::vector<std::uint64_t> words_of(std::size_t n, unsigned low_bits, unsigned key_bits,
                                    std::uint64_t shared, std::mt19937_64& gen) {
    std::vector<std::uint64_t> words(n);
    const std::uint64_t key_mask =
        key_bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << key_bits) - 1;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t key = (gen() & key_mask) | shared;
        words[i] = (low_bits >= 64 ? 0 : key << low_bits) | i;
    }
    return words;
}

} // namespace

TEST_CASE("word_sort: words of a key over an ascending index come out as std::sort orders them",
          "[plan][word_sort]") {
    std::mt19937_64 gen(3);
    bcl::detail::plan::word_sort sort; // one sorter: its scratch must not leak between inputs
    for (const std::size_t n : {0U, 1U, 2U, 255U, 256U, 257U, 1000U, 5000U})
        for (const unsigned key_bits : {0U, 1U, 3U, 8U, 9U, 17U, 40U})
            for (const std::uint64_t shared : {std::uint64_t{0}, std::uint64_t{0x500}}) {
                const unsigned low_bits = static_cast<unsigned>(std::bit_width(n));
                if (low_bits + key_bits + 11 > 64) continue; // the key, `shared` and the index fit
                std::vector<std::uint64_t> words = words_of(n, low_bits, key_bits, shared, gen);
                std::vector<std::uint64_t> expected = words;
                std::sort(expected.begin(), expected.end());
                INFO("n " << n << " key bits " << key_bits << " shared " << shared);
                sort(words, low_bits);
                CHECK(words == expected);
            }
}

TEST_CASE("word_sort: keys that fill every byte above the index, and a wide index",
          "[plan][word_sort]") {
    std::mt19937_64 gen(4);
    bcl::detail::plan::word_sort sort;
    for (const unsigned low_bits : {1U, 13U, 20U, 31U}) {
        const std::size_t n = std::min<std::size_t>(std::size_t{1} << low_bits, 3000);
        std::vector<std::uint64_t> words = words_of(n, low_bits, 64 - low_bits, 0, gen);
        std::vector<std::uint64_t> expected = words;
        std::sort(expected.begin(), expected.end());
        INFO("low bits " << low_bits);
        sort(words, low_bits);
        CHECK(words == expected);
    }
}
