// The saved state's byte format: one named list of fields per component, walked by the writer
// and by the reader alike, so every field is read back where it was written, a state cut short
// anywhere is refused with the name of the field it lacks, and bytes of another format version
// are refused before anything is read.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/record_model.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace bcl_test;

namespace {

using Catch::Matchers::Contains;

/// Writes a snapshot as field_writer does, noting where each field begins and which sequence
/// length was announced last (a cut inside a sequence's items is refused at its length, which
/// announced more items than the bytes hold).
class field_starts {
public:
    struct start {
        std::size_t offset;
        std::string name;
        std::string sequence; // the last length announced before it, if any
    };

    template <class T>
    void field(const char* name, const T& value) {
        note(name);
        m_out.field(name, value);
    }
    void count(const char* name, std::size_t n, std::size_t limit, std::size_t item_bytes) {
        note(name);
        m_out.count(name, n, limit, item_bytes);
    }
    template <class T>
    void length(const char* name, const std::vector<T>& items, std::size_t limit,
                std::size_t item_bytes) {
        note(name);
        m_sequence = name;
        m_out.length(name, items, limit, item_bytes);
    }
    template <class T>
    void items(const char* name, const std::vector<T>& items) {
        for (const T& x : items) field(name, x);
    }
    template <class T>
    void items(const char* name, const std::vector<T>& items, std::size_t n) {
        if (items.size() != n) FAIL(name << " holds " << items.size() << " items, not " << n);
        this->items(name, items);
    }

    [[nodiscard]] const std::vector<start>& starts() const noexcept { return m_starts; }
    [[nodiscard]] std::string finish() { return m_out.finish(); }

private:
    void note(const char* name) { m_starts.push_back({m_out.size(), name, m_sequence}); }

    bcl::detail::field_writer m_out;
    std::vector<start> m_starts;
    std::string m_sequence;
};

/// Walks the whole format of `s`: the header, the version, the options, every component's list.
field_starts walk(const bcl::detail::balancer_snapshot& s) {
    field_starts walked;
    walked.field("the header", bcl::detail::snapshot_magic);
    walked.field("the version", bcl::detail::snapshot_version);
    bcl::detail::option_fields(walked, s);
    bcl::detail::component_fields(walked, s);
    return walked;
}

/// `bytes` without its checksum, cut to `size` bytes and sealed with a valid checksum again.
std::string resealed(const std::string& bytes, std::size_t size) {
    std::string out = bytes.substr(0, size);
    const std::uint64_t sum = bcl::detail::fnv1a(out);
    for (int k = 0; k < 8; ++k) out.push_back(static_cast<char>((sum >> (8 * k)) & 0xffU));
    return out;
}

/// States of every shape the format has: tumbling and sliding, a quantile cap with its sketch,
/// memory estimates, a calibration's fit and ledger, finished with a short batch waiting.
std::vector<bcl::detail::balancer_snapshot> states_of_every_shape() {
    std::vector<bcl::detail::balancer_snapshot> out;
    const cost_list costs = lognormal_costs(300, 17);
    for (const bool sliding : {false, true})
        for (const bool finished : {false, true}) {
            bcl::options opt{.batch_size = 4, .lookahead = 3};
            if (sliding) opt.policy = bcl::lookahead_policy::sliding;
            opt.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.9, .warmup = 20};
            opt.memory_budget = 1e9;
            bcl::balancer<rec, decltype(bcl::with_memory(cost_of{}, &rec::cost))> b{
                bcl::with_memory(cost_of{}, &rec::cost), opt};
            const std::size_t n = finished ? 203 : 150;
            for (std::size_t i = 0; i < n; ++i) {
                while (!b.can_push()) (void)b.pop();
                b.push(rec{i, costs[i]});
            }
            if (finished) b.finish();
            (void)b.pop();
            out.push_back(b.save().snapshot);
        }
    bcl::balancer<double, decltype(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0))> calibrating{
        bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0), bcl::options{.batch_size = 4}};
    for (std::size_t i = 0; i < 100; ++i) {
        calibrating.push(costs[i] + 1.0);
        while (auto batch = calibrating.pop())
            calibrating.observe(calibrating.stats().batches - 1, 2.0 * costs[i]);
    }
    out.push_back(calibrating.save().snapshot);
    return out;
}

} // namespace

TEST_CASE("The writer and the reader walk one list: what is read back writes the same bytes",
          "[state][format]") {
    for (const bcl::detail::balancer_snapshot& s : states_of_every_shape()) {
        const std::string bytes = bcl::detail::to_bytes(s);
        field_starts walked = walk(s);
        const bool same_as_walked = walked.finish() == bytes;
        CHECK(same_as_walked);
        const bool same_again =
            bcl::detail::to_bytes(bcl::detail::snapshot_from_bytes(bytes)) == bytes;
        CHECK(same_again);
    }
}

TEST_CASE("A state cut short before any field, even with a valid checksum, is refused with the "
          "name of the field it lacks",
          "[state][format][errors]") {
    std::size_t cuts = 0;
    for (const bcl::detail::balancer_snapshot& s : states_of_every_shape()) {
        const std::string bytes = bcl::detail::to_bytes(s);
        const std::string body = bytes.substr(0, bytes.size() - 8);
        field_starts walked = walk(s);
        const bool same_as_walked = walked.finish() == bytes;
        REQUIRE(same_as_walked);
        REQUIRE(walked.starts().size() > 100);
        for (const field_starts::start& at : walked.starts()) {
            INFO("cut before " << at.name << " at byte " << at.offset);
            try {
                (void)bcl::detail::snapshot_from_bytes(resealed(body, at.offset));
                FAIL("a state cut before " << at.name << " was accepted");
            } catch (const bcl::error& e) {
                const std::string what = e.what();
                CHECK(what.find("ends before") != std::string::npos);
                const bool names_it =
                    what.find(at.name) != std::string::npos ||
                    (!at.sequence.empty() && what.find(at.sequence) != std::string::npos);
                CHECK(names_it);
            }
            ++cuts;
        }
        CHECK_NOTHROW(bcl::detail::snapshot_from_bytes(resealed(body, body.size())));
    }
    CHECK(cuts > 500);
}

TEST_CASE("Bytes of another format version are refused, naming both versions", "[state][format]") {
    const bcl::detail::balancer_snapshot s = states_of_every_shape().front();
    const std::string bytes = bcl::detail::to_bytes(s);
    std::string body = bytes.substr(0, bytes.size() - 8);
    for (const std::uint64_t version :
         {std::uint64_t{0}, std::uint64_t{8}, std::uint64_t{10}, ~std::uint64_t{0}}) {
        INFO("version " << version);
        for (int k = 0; k < 8; ++k)
            body[8 + static_cast<std::size_t>(k)] = static_cast<char>((version >> (8 * k)) & 0xffU);
        CHECK_THROWS_WITH(
            bcl::detail::snapshot_from_bytes(resealed(body, body.size())),
            Contains("format version " + std::to_string(version) + "; this build reads version 9"));
    }
}

TEST_CASE("Each fact is saved once: the waiting records are counted by their arrival positions "
          "and the rounds by statistics::windows",
          "[state][format]") {
    for (const bcl::detail::balancer_snapshot& s : states_of_every_shape()) {
        const field_starts walked = walk(s);
        std::vector<std::string> names;
        for (const field_starts::start& at : walked.starts())
            if (names.empty() || names.back() != at.name) names.push_back(at.name);
        const auto count = [&](const std::string& name) {
            return std::count(names.begin(), names.end(), name);
        };
        CHECK(count("windows") == 1);
        CHECK(count("the waiting record count") == 1);
        CHECK(count("the round counter") == 0);
        for (const std::string& name : names) {
            INFO(name);
            CHECK(count(name) == 1);
        }
    }
}
