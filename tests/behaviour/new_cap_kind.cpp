// The worked example of docs/design.md ("Adding things"): built by scripts/check_worked_example.sh
// against a copy of include/ with the document's diff applied, it checks that the new cap kind
// (cap.value rounded up to a power of two) is known by its name, is validated, caps records, and
// survives a saved state, with nothing else changed. Exits non-zero on any failure.

#include <bcl/bcl.hpp>
#include <bcl/names.hpp>

#include <cstdio>
#include <string>

int main() {
    int failures = 0;
    auto check = [&](bool ok, const char* what) {
        if (!ok) {
            std::printf("FAILED: %s\n", what);
            ++failures;
        }
    };
    const auto power_of_two = bcl::named<bcl::cap_kind>("power_of_two");
    check(power_of_two == static_cast<bcl::cap_kind>(3), "the kind is the list's fourth");
    check(bcl::name_of(power_of_two) == "power_of_two", "the kind is known by its name");
    check(bcl::names_text<bcl::cap_kind>() == "none, fixed, quantile, power_of_two",
          "tools list it with the others");
    bcl::options opt{.batch_size = 2, .lookahead = 2};
    opt.cap = {.kind = power_of_two, .value = 100.0};
    const auto cost = [](double x) { return x; };
    using balancer = bcl::balancer<double, decltype(cost)>;

    balancer b{cost, opt};
    for (const double x : {1000.0, 5.0, 7.0, 9.0}) b.push(x);
    b.finish();
    double costliest = 0.0;
    while (b.pop()) costliest = std::max(costliest, b.last_batch_cost());
    check(b.stats().records_capped == 1, "one record capped");
    check(costliest == 128.0 + 5.0, "the giant record balanced at 128, paired with the cheapest");

    bcl::options bad = opt;
    bad.cap.value = 0.5;
    std::string message;
    try {
        bcl::validate(bad);
    } catch (const bcl::error& e) {
        message = e.what();
    }
    check(message.find("power-of-two cap") != std::string::npos, "its own field checked");

    balancer saving{cost, opt};
    saving.push(3.0);
    const balancer::state s = saving.save();
    balancer restored{cost, opt, balancer::state::from_bytes(s.to_bytes(), s.pending)};
    check(restored.buffered() == 1, "a saved state restored");

    std::printf("%s\n", failures == 0 ? "worked example: ok" : "worked example: FAILED");
    return failures == 0 ? 0 : 1;
}
