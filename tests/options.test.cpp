// bcl::options and bcl::detail::visit_option_fields, the one list of its fields that saving,
// restoring and comparing states read. The list names every field of bcl::options exactly once
// (counted against the aggregate itself, so a field added to options but not to the list fails
// here), each name reaches the member it spells, each field round-trips through a saved state,
// and a restore with a different value is refused, naming the field, exactly when the field
// matters: the sliding options only under the sliding policy, each cap option only under the cap
// kinds that read it.

#include <bcl/detail/state/snapshot.hpp>
#include <bcl/detail/state/snapshot_check.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

using Catch::Matchers::Contains;

// The number of fields of an aggregate: the most initializers it accepts, each an object that
// converts to anything (so a member that is itself an aggregate takes one, not its own fields).
struct any_value {
    template <class T>
    operator T() const; // declared only: used in unevaluated contexts
};

template <class T, std::size_t... I>
constexpr bool brace_initializable(std::index_sequence<I...>) {
    return requires {
        T{(static_cast<void>(I), any_value{})...};
    };
}

template <class T, std::size_t N = 0>
constexpr std::size_t field_count() {
    if constexpr (brace_initializable<T>(std::make_index_sequence<N + 1>{}))
        return field_count<T, N + 1>();
    else
        return N;
}

// The arity trick itself, on aggregates whose answer is known.
struct two {
    int a;
    double b;
};
struct three_with_nested {
    two a;
    bool b;
    std::size_t c;
};
static_assert(field_count<two>() == 2);
static_assert(field_count<three_with_nested>() == 3);

/// Each listed field's name, as visit_option_fields gives them, in order.
std::vector<std::string> listed_names() {
    std::vector<std::string> names;
    bcl::detail::visit_option_fields(
        [&](const char* name, auto, auto) { names.emplace_back(name); });
    return names;
}

/// For each field, by the name the user spells it with: a change to a valid value that differs
/// from both the default and every base below, made through the member itself.
const std::map<std::string, std::function<void(bcl::options&)>>& changes() {
    using bcl::cap_kind;
    static const std::map<std::string, std::function<void(bcl::options&)>> c{
        {"batch_size", [](bcl::options& o) { o.batch_size = 5; }},
        {"lookahead", [](bcl::options& o) { o.lookahead = 3; }},
        {"drop_last", [](bcl::options& o) { o.drop_last = !o.drop_last; }},
        {"seed", [](bcl::options& o) { o.seed = 42; }},
        {"emission",
         [](bcl::options& o) {
             o.emission = o.emission == bcl::emission_order::shuffled
                              ? bcl::emission_order::costliest_first
                              : bcl::emission_order::shuffled;
         }},
        {"batching",
         [](bcl::options& o) {
             o.batching = o.batching == bcl::batch_cost::padded ? bcl::batch_cost::packed
                                                                : bcl::batch_cost::padded;
         }},
        {"policy",
         [](bcl::options& o) {
             o.policy = o.policy == bcl::lookahead_policy::sliding ? bcl::lookahead_policy::tumbling
                                                                   : bcl::lookahead_policy::sliding;
         }},
        {"buffer_windows", [](bcl::options& o) { o.buffer_windows = 3; }},
        {"mean_cost", [](bcl::options& o) { o.mean_cost = 2.5; }},
        {"max_age", [](bcl::options& o) { o.max_age = 6; }},
        {"cap.kind",
         [](bcl::options& o) {
             o.cap.kind = o.cap.kind == cap_kind::none    ? cap_kind::quantile
                          : o.cap.kind == cap_kind::fixed ? cap_kind::none
                                                          : cap_kind::fixed;
         }},
        {"cap.value", [](bcl::options& o) { o.cap.value = 7.5; }},
        {"cap.quantile", [](bcl::options& o) { o.cap.quantile = 0.9; }},
        {"cap.warmup", [](bcl::options& o) { o.cap.warmup = 50; }},
        {"cap.action",
         [](bcl::options& o) {
             o.cap.action = o.cap.action == bcl::cap_action::clip ? bcl::cap_action::truncate
                                                                  : bcl::cap_action::clip;
         }},
        {"cap.prior", [](bcl::options& o) { o.cap.prior = 12.5; }},
        {"memory_budget", [](bcl::options& o) { o.memory_budget = 100.0; }},
        {"largest_first", [](bcl::options& o) { o.largest_first = !o.largest_first; }},
        {"calibration.forgetting", [](bcl::options& o) { o.calibration.forgetting = 0.9; }},
        {"calibration.prior_weight", [](bcl::options& o) { o.calibration.prior_weight = 4.0; }},
        {"calibration.horizon", [](bcl::options& o) { o.calibration.horizon = 17; }},
        {"calibration.outlier_threshold",
         [](bcl::options& o) { o.calibration.outlier_threshold = 5.0; }},
    };
    return c;
}

/// Valid options under each policy and cap kind (a fixed cap needs a value).
std::vector<bcl::options> bases() {
    std::vector<bcl::options> all;
    for (const auto policy : {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding})
        for (const auto kind :
             {bcl::cap_kind::none, bcl::cap_kind::fixed, bcl::cap_kind::quantile}) {
            bcl::options o{.batch_size = 2, .policy = policy};
            o.cap.kind = kind;
            o.cap.value = 3.0;
            all.push_back(o);
        }
    return all;
}

/// Whether a field matters to what a balancer does under `o`, from the options' documentation:
/// the sliding options only under the sliding policy; cap.value only for a fixed cap, the
/// quantile, its warm-up and its prior only for a quantile cap, the action for any cap; the rest
/// always.
bool should_matter(const std::string& name, const bcl::options& o) {
    if (name == "buffer_windows" || name == "max_age")
        return o.policy == bcl::lookahead_policy::sliding;
    if (name == "cap.value") return o.cap.kind == bcl::cap_kind::fixed;
    if (name == "cap.quantile" || name == "cap.warmup" || name == "cap.prior")
        return o.cap.kind == bcl::cap_kind::quantile;
    if (name == "cap.action") return o.cap.kind != bcl::cap_kind::none;
    return true;
}

/// Whether every listed field of `a` equals that of `b`, except the one named `except`.
std::string first_difference(const bcl::options& a, const bcl::options& b,
                             const std::string& except = "") {
    std::string found;
    bcl::detail::visit_option_fields([&](const char* name, auto field, auto) {
        if (found.empty() && name != except && !(field(a) == field(b))) found = name;
    });
    return found;
}

} // namespace

TEST_CASE("visit_option_fields lists every field of bcl::options once, by its own name",
          "[options]") {
    const std::vector<std::string> names = listed_names();
    // Two members of options are structs (the cap, the calibration), whose own members are
    // listed instead.
    constexpr std::size_t fields = field_count<bcl::options>();
    constexpr std::size_t cap_fields = field_count<bcl::cap_options>();
    constexpr std::size_t calibration_fields = field_count<bcl::calibration_options>();
    std::size_t listed_cap = 0;
    std::size_t listed_calibration = 0;
    for (const std::string& n : names) {
        listed_cap += n.rfind("cap.", 0) == 0 ? 1 : 0;
        listed_calibration += n.rfind("calibration.", 0) == 0 ? 1 : 0;
    }
    CHECK(listed_cap == cap_fields);
    CHECK(listed_calibration == calibration_fields);
    CHECK(names.size() - listed_cap - listed_calibration == fields - 2);
    CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());

    // Every listed field reaches a different member (no two names read the same one).
    bcl::options o;
    std::set<const void*> addresses;
    bcl::detail::visit_option_fields(
        [&](const char*, auto field, auto) { addresses.insert(&field(o)); });
    CHECK(addresses.size() == names.size());

    // Each name reaches the member it spells: changing that member changes that field only.
    REQUIRE(changes().size() == names.size());
    for (const std::string& name : names) {
        INFO(name);
        REQUIRE(changes().count(name) == 1);
        bcl::options changed;
        changes().at(name)(changed);
        CHECK(first_difference(changed, bcl::options{}) == name);
        CHECK(first_difference(changed, bcl::options{}, name).empty());
    }
}

TEST_CASE("Every listed field survives a saved state's bytes", "[options]") {
    for (const bcl::options& base : bases())
        for (const std::string& name : listed_names()) {
            bcl::detail::balancer_snapshot s;
            s.opt = base;
            changes().at(name)(s.opt);
            INFO(name << " changed, policy " << static_cast<int>(base.policy) << ", cap kind "
                      << static_cast<int>(base.cap.kind));
            REQUIRE_NOTHROW(bcl::validate(s.opt));
            REQUIRE(first_difference(s.opt, base) == name);
            const bcl::detail::balancer_snapshot back =
                bcl::detail::read_snapshot(bcl::detail::to_bytes(s));
            CHECK(first_difference(back.opt, s.opt).empty());
        }
}

TEST_CASE("A field matters exactly when the options' documentation says it does, and a restore "
          "with another value of it is refused by name exactly then",
          "[options]") {
    for (const bcl::options& saved : bases()) {
        std::map<std::string, bool> matters;
        bcl::detail::visit_option_fields(
            [&](const char* name, auto, auto predicate) { matters[name] = predicate(saved); });
        for (const std::string& name : listed_names()) {
            INFO(name << ", saved with policy " << static_cast<int>(saved.policy) << ", cap kind "
                      << static_cast<int>(saved.cap.kind));
            CHECK(matters.at(name) == should_matter(name, saved));
            bcl::options given = saved;
            changes().at(name)(given);
            if (should_matter(name, saved))
                CHECK_THROWS_WITH(bcl::detail::require_same_options(saved, given),
                                  Contains("options::" + name + " = "));
            else
                CHECK_NOTHROW(bcl::detail::require_same_options(saved, given));
        }
        CHECK_NOTHROW(bcl::detail::require_same_options(saved, saved));
    }
}

TEST_CASE("Sliding-only fields do not matter for tumbling, cap fields only for their cap kind",
          "[options]") {
    // The same rule, spelled out for the cases a user meets.
    bcl::options tumbling{.batch_size = 4, .policy = bcl::lookahead_policy::tumbling};
    bcl::options other = tumbling;
    other.buffer_windows = 5;
    other.max_age = 9;
    other.cap.value = 2.0;
    other.cap.quantile = 0.5;
    other.cap.warmup = 3;
    other.cap.action = bcl::cap_action::truncate;
    CHECK_NOTHROW(bcl::detail::require_same_options(tumbling, other));

    bcl::options fixed = tumbling;
    fixed.cap = {.kind = bcl::cap_kind::fixed, .value = 4.0};
    bcl::options fixed_other = fixed;
    fixed_other.cap.quantile = 0.5;
    fixed_other.cap.warmup = 3;
    CHECK_NOTHROW(bcl::detail::require_same_options(fixed, fixed_other));
    fixed_other.cap.value = 5.0;
    CHECK_THROWS_WITH(bcl::detail::require_same_options(fixed, fixed_other),
                      Contains("options::cap.value = 4, not 5"));

    bcl::options quantile = tumbling;
    quantile.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.95};
    bcl::options quantile_other = quantile;
    quantile_other.cap.value = 8.0;
    CHECK_NOTHROW(bcl::detail::require_same_options(quantile, quantile_other));
    quantile_other.cap.warmup = 10;
    CHECK_THROWS_WITH(bcl::detail::require_same_options(quantile, quantile_other),
                      Contains("options::cap.warmup = 0, not 10"));

    bcl::options sliding{.batch_size = 4, .policy = bcl::lookahead_policy::sliding};
    bcl::options sliding_other = sliding;
    sliding_other.max_age = 4;
    CHECK_THROWS_WITH(bcl::detail::require_same_options(sliding, sliding_other),
                      Contains("options::max_age = 2, not 4"));
}
