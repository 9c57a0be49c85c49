// bcl-fuzz-balancer: the input chooses a balancer's options (pick_options in fuzz_support.hpp)
// and then a sequence of operations: push a record with an adversarial cost (pick_record), pop,
// drain, finish, save and restore. The balancer is driven and checked by balancer_driver.hpp:
// every contract point against a reference balancer fed the same accepted records in the same
// order, never saved, restored or given an operation that failed (batch sizes and count, each
// record exactly once, the delay bound and the statistics, the same batches as the reference,
// and an operation that fails changes nothing). Anything else that goes wrong (a crash, a
// sanitizer report, a hang, an absurd allocation) is a finding too.

#include "balancer_driver.hpp"
#include "fuzz_support.hpp"

#include <bcl/options.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

namespace {

using namespace bcl_fuzz;

template <class Estimator>
class balancer_run : public balancer_driver<balancer_run<Estimator>, Estimator> {
    using driver = balancer_driver<balancer_run<Estimator>, Estimator>;

public:
    using typename driver::balancer_t;

    balancer_run(const bcl::options& opt, std::unique_ptr<balancer_t> the_subject,
                 std::unique_ptr<balancer_t> the_reference)
        : driver(opt, std::move(the_subject), std::move(the_reference)) {}

    // The operations, by the input's first byte.
    void step(byte_source& in) {
        const std::uint8_t op = in.byte();
        if (op < 144)
            this->push(in, (op & 1U) != 0);
        else if (op < 176)
            this->pop_once();
        else if (op < 200)
            this->pop_available();
        else if (op < 208)
            this->finish();
        else if (op < 240)
            this->save_and_restore(in.byte());
        else if (op >= 248)
            this->push_repeated(in);
        else
            this->save_only();
    }

    [[nodiscard]] rec pick(byte_source& in, std::uint64_t id) const { return pick_record(in, id); }

    [[nodiscard]] Estimator make_estimator() const {
        return bcl_fuzz::make_estimator(static_cast<Estimator*>(nullptr));
    }
};

template <class Estimator>
void run(const bcl::options& opt, byte_source& in) {
    const Estimator estimator = make_estimator(static_cast<Estimator*>(nullptr));
    auto subject = make_balancer(estimator, opt);
    if (!subject) return; // invalid options are refused: fine
    auto reference = make_balancer(estimator, opt);
    require(reference != nullptr, "the options were accepted once and refused the second time");
    balancer_run<Estimator>(opt, std::move(subject), std::move(reference)).run(in);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    byte_source in(std::span<const std::uint8_t>(data, size));
    bool memory = false;
    const bcl::options opt = pick_options(in, memory);
    note([&] { return describe(opt) + (memory ? " (with a memory estimate)" : ""); });
    // Nothing is caught here: an exception that escapes (anything but a bcl::error, which the
    // operations catch) ends in std::terminate at the throw, so the report shows where it came
    // from.
    if (memory)
        run<memory_estimator>(opt, in);
    else
        run<plain_estimator>(opt, in);
    return 0;
}
