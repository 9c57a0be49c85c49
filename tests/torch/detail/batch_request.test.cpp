// detail/batch_request.hpp, as a specification: a bcl sampler's next(n) is answered only for its
// own batch size, the one it balanced or planned. check_batch_request passes when the size asked
// for is the sampler's, whatever that is, and otherwise throws a bcl::error that names the
// sampler's next(), both sizes, the setting the sampler's size comes from, and how a data loader
// gets the right one (bcl::torch::make_data_loader).

#include <bcl/error.hpp>
#include <bcl/torch/detail/batch_request.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <limits>
#include <string>

namespace {

using bcl::torch::detail::check_batch_request;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// The message check_batch_request throws for (asked, batch_size), or "" if it passes.
std::string refusal(std::size_t asked, std::size_t batch_size) {
    try {
        check_batch_request(asked, batch_size, "bcl::torch::some_sampler", "options::batch_size");
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("batch_request: a request for the sampler's own batch size passes, whatever the size",
          "[torch][batch_request]") {
    constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
    for (const std::size_t size :
         {std::size_t{0}, std::size_t{1}, std::size_t{16}, std::size_t{1000003}, most}) {
        CAPTURE(size);
        REQUIRE_NOTHROW(check_batch_request(size, size, "s", "batch size"));
    }
}

TEST_CASE("batch_request: every other size is refused, larger or smaller, by one or by far",
          "[torch][batch_request]") {
    // The sampler's size is 16: each of these differs from it, so each is refused.
    for (const std::size_t asked :
         {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{17}, std::size_t{32},
          std::numeric_limits<std::size_t>::max()}) {
        CAPTURE(asked);
        REQUIRE_THROWS_AS(check_batch_request(asked, 16, "s", "batch size"), bcl::error);
    }
    // And a sampler of batch size 0 refuses a request for 1.
    REQUIRE_THROWS_AS(check_batch_request(1, 0, "s", "batch size"), bcl::error);
}

TEST_CASE("batch_request: the refusal names the sampler's next(), both sizes, the setting and "
          "make_data_loader",
          "[torch][batch_request]") {
    const std::string what = refusal(32, 16);
    CAPTURE(what);
    REQUIRE_THAT(what, StartsWith("bcl::torch::some_sampler::next: "));
    REQUIRE_THAT(what, Contains("asked for a batch of 32 indices"));
    REQUIRE_THAT(what, Contains("the sampler's options::batch_size is 16"));
    REQUIRE_THAT(what, Contains("bcl::torch::make_data_loader"));

    // The sizes are the caller's, in their places: asked first, the sampler's second.
    const std::string swapped = refusal(16, 32);
    REQUIRE_THAT(swapped, Contains("a batch of 16 indices") && Contains("is 32"));
    // The setting's name is the caller's too.
    try {
        check_batch_request(3, 4, "bcl::torch::distributed_balanced_sampler", "batch size");
        FAIL("a request for 3 of a sampler of 4 passed");
    } catch (const bcl::error& e) {
        REQUIRE_THAT(e.what(), StartsWith("bcl::torch::distributed_balanced_sampler::next: ") &&
                                   Contains("the sampler's batch size is 4"));
    }
}
