// bcl::stage_cost_estimator (stage_cost_estimator.hpp), as a specification: an estimator of stage
// costs gives a record a std::array<double, D>, D from 1 to bcl::max_plan_stages, and
// bcl::stage_count reads D off it; anything else is not one.

#include <bcl/multimodal_cost.hpp>
#include <bcl/stage_cost_estimator.hpp>
#include <bcl/stage_plan.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <vector>

namespace {

struct two_stage_record {
    double vision = 0.0;
    double language = 0.0;
};

struct two_stages {
    std::array<double, 2> operator()(const two_stage_record& r) const {
        return {r.vision, r.language};
    }
};

struct one_stage {
    std::array<double, 1> operator()(const two_stage_record& r) const { return {r.language}; }
};

struct most_stages {
    std::array<double, bcl::max_plan_stages> operator()(const two_stage_record&) const {
        return {};
    }
};

struct too_many_stages {
    std::array<double, bcl::max_plan_stages + 1> operator()(const two_stage_record&) const {
        return {};
    }
};

struct no_stages {
    std::array<double, 0> operator()(const two_stage_record&) const { return {}; }
};

struct one_number {
    double operator()(const two_stage_record& r) const { return r.language; }
};

struct floats {
    std::array<float, 2> operator()(const two_stage_record&) const { return {}; }
};

struct a_vector {
    std::vector<double> operator()(const two_stage_record&) const { return {1.0, 2.0}; }
};

struct mutating { // not const-callable: still an estimator, the balancer calls its own copy
    int calls = 0;
    std::array<double, 2> operator()(const two_stage_record&) {
        ++calls;
        return {1.0, 2.0};
    }
};

} // namespace

TEST_CASE("An estimator of stage costs gives a record an array of D doubles, D from 1 to "
          "max_plan_stages",
          "[stage_cost_estimator]") {
    STATIC_REQUIRE(bcl::stage_cost_estimator<two_stages, two_stage_record>);
    STATIC_REQUIRE(bcl::stage_count<two_stages, two_stage_record> == 2);
    STATIC_REQUIRE(bcl::stage_count<one_stage, two_stage_record> == 1);
    STATIC_REQUIRE(bcl::stage_count<most_stages, two_stage_record> == bcl::max_plan_stages);
    STATIC_REQUIRE(bcl::stage_cost_estimator<mutating, two_stage_record>);
}

TEST_CASE("bcl::multimodal_cost is an estimator of two stage costs", "[stage_cost_estimator]") {
    STATIC_REQUIRE(bcl::stage_cost_estimator<bcl::multimodal_cost, bcl::multimodal_record>);
    STATIC_REQUIRE(bcl::stage_count<bcl::multimodal_cost, bcl::multimodal_record> == 2);
}

TEST_CASE("No stages, more than max_plan_stages, one number, other element types or a vector "
          "are not stage costs",
          "[stage_cost_estimator]") {
    STATIC_REQUIRE_FALSE(bcl::stage_cost_estimator<no_stages, two_stage_record>);
    STATIC_REQUIRE_FALSE(bcl::stage_cost_estimator<too_many_stages, two_stage_record>);
    STATIC_REQUIRE_FALSE(bcl::stage_cost_estimator<one_number, two_stage_record>);
    STATIC_REQUIRE_FALSE(bcl::stage_cost_estimator<floats, two_stage_record>);
    STATIC_REQUIRE_FALSE(bcl::stage_cost_estimator<a_vector, two_stage_record>);
    STATIC_REQUIRE_FALSE(bcl::stage_cost_estimator<two_stages, int>); // not callable on an int
}
