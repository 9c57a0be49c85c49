// The record streams (random.hpp, workload.hpp): the published SplitMix64 constants, synthetic
// draws, the DistributedSampler-style file stream, and bad specs and workload files.
// Expected numbers are derived in the comments, never copied from the code's output.

#include "workload.hpp"

#include "cost_and_cap.hpp"
#include "metrics.hpp"
#include "random.hpp"
#include "simulate.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

using Catch::Matchers::Contains;

using bcl_sim::sim_config;

namespace {

std::filesystem::path write_temp(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / fmt::format("bcl_sim_test_{}", name);
    std::ofstream(path) << text;
    return path;
}

} // namespace

TEST_CASE("sim: the random streams are fully specified", "[sim][source]") {
    // SplitMix64 seeded with 0 (Steele, Lea, Flood 2014; the reference seeding generator of the
    // xoshiro family): its first outputs are published constants.
    bcl_sim::splitmix rng(0);
    CHECK(rng.next() == 0xe220a8397b1dcdafULL);
    CHECK(rng.next() == 0x6e789e6aa1b965f4ULL);
    CHECK(rng.next() == 0x06c45d188009454fULL);
    // The counter form is the same sequence, at random access.
    CHECK(bcl_sim::stream_word(0, 2) == 0x06c45d188009454fULL);
    CHECK(bcl_sim::unit_interval(0) == 0.0);
    CHECK(bcl_sim::unit_interval(~std::uint64_t{0}) < 1.0);
    CHECK(bcl_sim::unit_interval_open0(0) > 0.0);
    CHECK(bcl_sim::unit_interval_open0(~std::uint64_t{0}) == 1.0);
}

TEST_CASE("sim: synthetic distributions draw what they say", "[sim][source]") {
    const std::uint64_t key = bcl_sim::stream_key(3, bcl_sim::domain::synthetic, 0);
    constexpr std::size_t n = 20000;
    const auto draws = [&](std::string_view spec) {
        const auto d = bcl_sim::parse_dist(spec);
        std::vector<double> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = bcl_sim::draw_length(d, key, i);
        return v;
    };
    {
        const auto v = draws("uniform:lo=3,hi=5");
        const std::set<double> values(v.begin(), v.end());
        CHECK(values == std::set<double>{3, 4, 5});
    }
    {
        // Median of a lognormal is exp(mu): exp(6) = 403.4; lengths are rounded up.
        const auto v = draws("lognormal:mu=6,sigma=1");
        CHECK(bcl_sim::nearest_rank(v, 0.5) == Approx(403.4).epsilon(0.05));
    }
    {
        // Pareto: never below xm; P(L > 2 xm) = 2^-alpha = 2^-1.5 = 0.354.
        const auto v = draws("pareto:xm=100,alpha=1.5");
        CHECK(*std::min_element(v.begin(), v.end()) >= 100.0);
        const auto above = std::count_if(v.begin(), v.end(), [](double x) { return x > 200.0; });
        CHECK(static_cast<double>(above) / static_cast<double>(n) == Approx(0.354).margin(0.015));
    }
    {
        // Bimodal with p = 0.25 of the long mode (median 4096) and a short mode of median 512:
        // with sigma 0.1 the modes do not overlap, so the share above 1500 is about 0.25.
        const auto v = draws("bimodal:short=512,long=4096,p=0.25,sigma=0.1");
        const auto longs = std::count_if(v.begin(), v.end(), [](double x) { return x > 1500.0; });
        CHECK(static_cast<double>(longs) / static_cast<double>(n) == Approx(0.25).margin(0.015));
    }
    // Each rank draws its own stream.
    bcl_sim::synthetic_source src(bcl_sim::parse_dist("lognormal"), 2, 1);
    int same = 0;
    for (std::uint64_t i = 0; i < 100; ++i) same += src.length(0, i) == src.length(1, i) ? 1 : 0;
    CHECK(same < 10);
}

TEST_CASE("sim: the file stream is DistributedSampler's", "[sim][source]") {
    // 10 distinct lengths over R = 4 ranks: ceil(10/4) = 3 records per rank per epoch, 12 in all,
    // so each epoch reads every length once plus two of them a second time (the padding).
    auto lengths = std::make_shared<const std::vector<double>>(
        std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    bcl_sim::file_source src(lengths, 4, 5);
    REQUIRE(src.global_epoch() == std::uint64_t{12});
    REQUIRE(src.dataset_size() == std::uint64_t{10});
    std::vector<std::vector<double>> epochs(3);
    for (std::uint64_t e = 0; e < 3; ++e) {
        std::map<double, int> count;
        // Global order: position g is rank g % 4, index e*3 + g / 4.
        for (std::uint64_t g = 0; g < 12; ++g) {
            const double x = src.length(g % 4, e * 3 + g / 4);
            ++count[x];
            epochs[e].push_back(x);
        }
        CHECK(count.size() == 10);
        int twice = 0;
        for (const auto& [x, n] : count) twice += n == 2 ? 1 : 0;
        CHECK(twice == 2);
        // The padding repeats the start of the epoch's order.
        CHECK(epochs[e][10] == epochs[e][0]);
        CHECK(epochs[e][11] == epochs[e][1]);
    }
    CHECK(epochs[0] != epochs[1]); // reshuffled each epoch
    // Same seed, same stream; random access gives what sequential reading gave.
    bcl_sim::file_source again(lengths, 4, 5, 1);
    CHECK(again.length(3, 7) == epochs[2][(7 - 6) * 4 + 3]);
    CHECK(again.length(0, 0) == epochs[0][0]);
}

TEST_CASE("sim: specs parse with defaults and reject bad input", "[sim][input]") {
    const auto ln = std::get<bcl_sim::lognormal_spec>(bcl_sim::parse_dist("lognormal:mu=5"));
    CHECK(ln.mu == 5.0);
    CHECK(ln.sigma == 1.0);
    const auto f = std::get<bcl_sim::file_spec>(bcl_sim::parse_dist("file:a,b=c.txt"));
    CHECK(f.path == "a,b=c.txt");
    const auto cost = bcl_sim::parse_cost("affine");
    CHECK(cost.c == 1.0 / 24576.0);
    CHECK(bcl_sim::parse_cost("affine:c=0").c == 0.0);

    using bcl_sim::input_error;
    CHECK_THROWS_WITH(bcl_sim::parse_dist("weibull:k=2"),
                      Contains("unknown distribution 'weibull'"));
    CHECK_THROWS_WITH(bcl_sim::parse_dist("lognormal:mu=x"),
                      Contains("mu = 'x' is not a finite number"));
    CHECK_THROWS_WITH(bcl_sim::parse_dist("lognormal:nu=1"), Contains("unknown parameter 'nu'"));
    CHECK_THROWS_AS(bcl_sim::parse_dist("pareto:alpha=0"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("uniform:lo=5,hi=4"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("uniform:lo=0.5"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("bimodal:p=2"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("file:"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("lognormal:mu"), input_error);
    CHECK_THROWS_WITH(bcl_sim::parse_cost("affine:a=-1"), Contains("must be >= 0"));
    CHECK_THROWS_WITH(bcl_sim::parse_cost("cubic"), Contains("unknown cost model"));

    sim_config cfg;
    cfg.ranks = 0;
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--ranks"));
    cfg.ranks = 2;
    cfg.policies = {"none", "sorted"};
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("unknown policy 'sorted'"));
}

TEST_CASE("sim: workload files are checked line by line", "[sim][input]") {
    const auto good = write_temp("good.txt", "12\n 7 \n\n0\n3\n");
    CHECK(bcl_sim::load_lengths(good.string()) == std::vector<double>{12, 7, 0, 3});
    const auto fraction = write_temp("fraction.txt", "12\n3.5\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(fraction.string()),
                      Contains(":2: length 3.5 is not a whole number"));
    const auto huge = write_temp("huge.txt", "1e23\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(huge.string()),
                      Contains(":1: length 1e23 is above 2^31"));

    CHECK_THROWS_WITH(bcl_sim::load_lengths("/nonexistent/bcl_sim_lengths.txt"),
                      Contains("cannot open"));
    const auto text = write_temp("text.txt", "12\n7\nseven\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(text.string()),
                      Contains(":3: 'seven' is not a number"));
    const auto partial = write_temp("partial.txt", "12\n7x\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(partial.string()), Contains(":2: '7x'"));
    const auto negative = write_temp("negative.txt", "12\n-4\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(negative.string()), Contains(":2: negative length -4"));
    const auto inf = write_temp("inf.txt", "inf\n");
    CHECK_THROWS_AS(bcl_sim::load_lengths(inf.string()), bcl_sim::input_error);
    const auto empty = write_temp("empty.txt", "\n \n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(empty.string()), Contains("no lengths"));

    // The tools' one reader: numbers written as numbers, CRLF line ends, 2^31 itself; nothing
    // that merely starts like a number, no hexadecimal, no NaN, nothing past 2^31.
    const auto written = write_temp("written.txt", "1e3\r\n1000.0\r\n+5\n-0\n2147483648\n");
    CHECK(bcl_sim::load_lengths(written.string()) ==
          std::vector<double>{1000, 1000, 5, 0, 2147483648.0});
    for (const char* line : {"0x10", "nan", "1e", "12 13", "2147483649", "1.5e0"}) {
        const auto bad = write_temp("bad.txt", fmt::format("7\n{}\n", line));
        CAPTURE(line);
        CHECK_THROWS_WITH(bcl_sim::load_lengths(bad.string()),
                          Contains("bad.txt:2: ") && Contains(line));
        std::filesystem::remove(bad);
    }
    std::filesystem::remove(written);

    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist(fmt::format("file:{}", negative.string()));
    CHECK_THROWS_AS(bcl_sim::simulate(cfg), bcl_sim::input_error);

    for (const auto& p : {good, fraction, huge, text, partial, negative, inf, empty})
        std::filesystem::remove(p);
}
