// Writes the seed corpus of the fuzz targets: `bcl-fuzz-make-corpus <dir>` creates
// <dir>/balancer/, <dir>/state/ and <dir>/calibration/ and fills them with a few dozen small
// inputs, each a sequence of the decisions the harnesses read (fuzz_support.hpp). The output is
// deterministic; the repository's fuzz/corpus/ is this program's output.

#include "fuzz_support.hpp"

#include <bcl/balancer.hpp>
#include <bcl/options.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using namespace bcl_fuzz;

// Appends decisions in the order the harnesses read them.
class seed {
public:
    seed& byte(std::uint8_t v) {
        m_bytes.push_back(v);
        return *this;
    }
    seed& u16(std::uint16_t v) {
        return byte(static_cast<std::uint8_t>(v & 0xffU)).byte(static_cast<std::uint8_t>(v >> 8));
    }
    seed& raw(const std::string& bytes) {
        m_bytes.insert(m_bytes.end(), bytes.begin(), bytes.end());
        return *this;
    }
    // A value as pick_value reads it: 0..15 in one byte, else a multiple of 1/64 up to 1023, or
    // one of pick_value's special codes.
    seed& value(double v) {
        if (v >= 0.0 && v < 16.0 && v == static_cast<double>(static_cast<int>(v)))
            return byte(static_cast<std::uint8_t>(v));
        return byte(112).u16(static_cast<std::uint16_t>(v * 64.0));
    }
    seed& special(std::uint8_t code) { return byte(code); }

    struct opts {
        std::uint8_t batch_size = 4, lookahead = 2;
        bool sliding = false, drop_last = false, shuffle = true, largest_first = false;
        bool memory = false, truncate = false;
        std::uint8_t buffer_windows = 2, max_age = 2;
        std::uint16_t seed = 7;
        std::uint8_t cap = 0; // 0 none, 1 fixed (value 6), 2 quantile p90 warmup 5
        std::uint8_t budget = 0;
    };
    seed& options(const opts& o) {
        byte(static_cast<std::uint8_t>(o.batch_size - 1))
            .byte(static_cast<std::uint8_t>(o.lookahead - 1));
        byte(static_cast<std::uint8_t>((o.sliding ? 1 : 0) | (o.drop_last ? 2 : 0) |
                                       (o.shuffle ? 4 : 0) | (o.largest_first ? 8 : 0) |
                                       (o.memory ? 16 : 0) | (o.truncate ? 32 : 0)));
        byte(static_cast<std::uint8_t>(o.buffer_windows - 1));
        byte(static_cast<std::uint8_t>(o.max_age -
                                       (o.buffer_windows - 1))); // age % 4 over the minimum
        u16(o.seed);
        if (o.cap == 0) byte(0);
        if (o.cap == 1) byte(1).value(6.0);
        if (o.cap == 2) byte(2 | (1 << 2)).byte(5); // quantiles[1] = 0.9, warmup 5
        if (o.budget == 0) return byte(0);
        return byte(static_cast<std::uint8_t>(128 | o.budget));
    }
    // A push as the balancer target reads it: op, cost, extras (memory in the top nibble).
    seed& push(double cost, std::uint8_t memory = 1, bool by_copy = false) {
        byte(by_copy ? 1 : 0).value(cost);
        return byte(static_cast<std::uint8_t>(memory << 4));
    }
    seed& push_special(std::uint8_t code) { return byte(0).special(code).byte(0x10); }
    // The same record `times` times (2..32), each followed by a drain.
    seed& push_repeated(std::uint8_t times, std::uint8_t code) {
        return byte(248).byte(static_cast<std::uint8_t>(times - 2)).special(code).byte(0x10);
    }
    seed& pop() { return byte(150); }
    seed& drain() { return byte(180); }
    seed& finish() { return byte(200); }
    seed& restore(std::uint8_t how) { return byte(210).byte(how); }
    seed& save_only() { return byte(245); }

    [[nodiscard]] const std::vector<std::uint8_t>& bytes() const { return m_bytes; }

private:
    std::vector<std::uint8_t> m_bytes;
};

// A small deterministic stream of costs: mostly short, now and then long.
double cost_at(std::uint64_t i) {
    std::uint64_t z = i * 0x9e3779b97f4a7c15ULL + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (z % 8 == 0) ? static_cast<double>(z % 900) / 8.0 + 10.0 : static_cast<double>(z % 12);
}

void write(const std::filesystem::path& dir, const std::string& name,
           const std::vector<std::uint8_t>& bytes) {
    std::filesystem::create_directories(dir);
    std::ofstream out(dir / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    std::printf("%s/%s: %zu bytes\n", dir.c_str(), name.c_str(), bytes.size());
}

void balancer_seeds(const std::filesystem::path& dir) {
    using opts = seed::opts;
    struct named {
        const char* name;
        opts o;
    };
    opts sliding;
    sliding.sliding = true;
    opts drop;
    drop.drop_last = true;
    opts sliding_drop = sliding;
    sliding_drop.drop_last = true;
    opts memory;
    memory.memory = true;
    memory.budget = 40;
    opts sliding_memory = memory;
    sliding_memory.sliding = true;
    opts fixed_cap;
    fixed_cap.cap = 1;
    fixed_cap.truncate = true;
    opts quantile_cap = sliding;
    quantile_cap.cap = 2;
    opts wide;
    wide.batch_size = 8;
    wide.lookahead = 5;
    wide.largest_first = true;
    opts wide_sliding = wide;
    wide_sliding.sliding = true;
    wide_sliding.buffer_windows = 3;
    wide_sliding.max_age = 4;
    opts single;
    single.batch_size = 1;
    single.lookahead = 1;
    single.shuffle = false;
    const named configs[] = {{"tumbling", opts{}},     {"sliding", sliding},
                             {"drop-last", drop},      {"sliding-drop-last", sliding_drop},
                             {"memory", memory},       {"sliding-memory", sliding_memory},
                             {"fixed-cap", fixed_cap}, {"quantile-cap", quantile_cap},
                             {"wide", wide},           {"wide-sliding", wide_sliding},
                             {"single", single}};
    std::uint64_t next = 0;
    for (const named& c : configs) {
        // Eager: pop after every push, save and restore twice (once through the bytes, once by
        // moving the records out), finish mid-way through a window.
        seed eager;
        eager.options(c.o);
        for (int i = 0; i < 37; ++i) {
            eager.push(cost_at(next++), static_cast<std::uint8_t>(1 + i % 5), i % 3 == 0).drain();
            if (i == 13) eager.restore(2);
            if (i == 29) eager.restore(3).save_only();
        }
        eager.finish().pop().restore(1).drain();
        write(dir, std::string("eager-") + c.name, eager.bytes());

        // Lazy: pop only when needed, with failed operations in between (invalid costs, pushes
        // while batches wait, a push after finish).
        seed lazy;
        lazy.options(c.o);
        for (int i = 0; i < 29; ++i) {
            lazy.push(cost_at(next++), 2);
            if (i % 9 == 4) lazy.push_special(192).push_special(195); // NaN, -1: refused
            if (i % 11 == 10) lazy.pop().push(1.0).pop();
        }
        lazy.finish().push(3.0).drain();
        write(dir, std::string("lazy-") + c.name, lazy.bytes());
    }
    // Adversarial valid costs: ties, zeros, subnormals, huge values whose sums overflow.
    for (const bool is_sliding : {false, true}) {
        opts o;
        o.sliding = is_sliding;
        seed s;
        s.options(o);
        const std::uint8_t codes[] = {176, 177, 178, 179, 180, 181, 182, 186, 187, 189, 190, 191};
        for (int i = 0; i < 24; ++i) s.push_special(codes[i % 12]).pop();
        s.finish().drain();
        write(dir, std::string("tiny-and-huge-") + (is_sliding ? "sliding" : "tumbling"),
              s.bytes());
        // Runs of one value: ties, the largest accepted estimate, and fractions of DBL_MAX
        // whose sums overflow.
        seed r;
        r.options(o);
        r.push_repeated(9, 5).push_repeated(12, 216).push_repeated(16, 201).push_repeated(10, 217);
        r.push_repeated(5, 183).finish().drain();
        write(dir, std::string("runs-") + (is_sliding ? "sliding" : "tumbling"), r.bytes());
        // The first window all fractions of DBL_MAX: its packs' sums overflow.
        seed v;
        v.options(o);
        v.push_repeated(20, 201).push_repeated(6, 4).restore(2).finish().drain();
        write(dir, std::string("overflow-first-") + (is_sliding ? "sliding" : "tumbling"),
              v.bytes());
        seed t;
        t.options(o);
        for (int i = 0; i < 20; ++i) t.push(5.0).push(5.0).pop();
        t.restore(0).finish().drain();
        write(dir, std::string("all-equal-") + (is_sliding ? "sliding" : "tumbling"), t.bytes());
    }
}

// A real state's bytes, from a balancer driven directly.
template <class Estimator>
std::string saved_state(const bcl::options& opt, int pushes, bool finish, int drained) {
    bcl::balancer<rec, Estimator> b(make_estimator(static_cast<Estimator*>(nullptr)), opt);
    for (int i = 0; i < pushes; ++i) {
        const auto id = static_cast<std::uint64_t>(i);
        b.push(rec{id, cost_at(id), static_cast<double>(1 + i % 4), 1.0, false});
        if (i % 5 == 0)
            while (b.pop()) {
            }
        while (!b.can_push() && b.pop()) {
        }
    }
    if (finish) b.finish();
    for (int k = 0; k < drained; ++k) (void)b.pop();
    return b.save().to_bytes();
}

void state_seeds(const std::filesystem::path& dir) {
    bcl::options tumbling{
        .batch_size = 3, .lookahead = 2, .seed = 5, .policy = bcl::lookahead_policy::tumbling};
    bcl::options sliding{.batch_size = 3, .lookahead = 2, .seed = 5};
    bcl::options capped = sliding;
    capped.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.9, .warmup = 4};
    bcl::options budget = tumbling;
    budget.memory_budget = 30.0;
    budget.drop_last = true;
    const std::string states[] = {
        saved_state<plain_estimator>(tumbling, 17, false, 0),
        saved_state<plain_estimator>(sliding, 23, false, 0),
        saved_state<plain_estimator>(sliding, 23, true, 2),
        saved_state<plain_estimator>(capped, 30, false, 0),
        saved_state<memory_estimator>(budget, 19, false, 0),
        saved_state<memory_estimator>(budget, 20, true, 1),
    };
    int n = 0;
    for (const std::string& st : states) {
        ++n;
        // Mode 0: the bytes as saved; mode 1: without the checksum, which the harness appends.
        write(dir, "raw-" + std::to_string(n), seed().byte(0).byte(0).byte(40).raw(st).bytes());
        write(dir, "unsealed-" + std::to_string(n),
              seed().byte(1).byte(0).byte(40).raw(st.substr(0, st.size() - 8)).bytes());
    }
    // Modes 2 and 3: a state built from options and pushes, then mutated.
    using opts = seed::opts;
    opts o;
    opts s;
    s.sliding = true;
    opts m;
    m.memory = true;
    m.budget = 50;
    m.drop_last = true;
    const opts built[] = {o, s, m};
    // Each row: the number of mutations (1 + first % 8), then per mutation its kind, field
    // (16 bits) and argument, as mutate() in state.fuzz.cpp reads them.
    const std::uint8_t mutations[][8] = {
        {0, 1, 5, 0, 12, 0, 0, 0},   // field 5 (seed) := 2^53
        {0, 3, 40, 0, 255, 0, 0, 0}, // field 40 minus 1
        {0, 2, 30, 0, 192, 0, 0, 0}, // field 30 := NaN
        {1, 6, 45, 0, 1, 17, 0, 0},  // delete field 45, then field 17 := 1
    };
    // Mode 4: a built state whose decoded fields change. Each row: the number of changes
    // (1 + first % 4), then per change its kind and arguments, as mutate_fields() reads them.
    const std::uint8_t field_changes[][6] = {
        {0, 0, 15, 0, 0, 0}, // round := 2^63
        {0, 1, 17, 0, 0, 0}, // stats.batches := 2^64 - 2
        {0, 7, 13, 1, 0, 0}, // 2^62 + 5 records more before buffered record 1
        {1, 6, 3, 5, 0, 0},  // 3 records more dropped (and pushed); drop_last toggled
        {0, 18, 2, 0, 0, 0}, // buffered record 2 counted as handed out
        {0, 11, 9, 0, 0, 0}, // waiting_records := 2^26
    };
    for (const opts& options : built)
        for (std::size_t row = 0; row < std::size(field_changes); ++row) {
            seed sd;
            sd.byte(4).byte(0).byte(20).options(options);
            sd.byte(9).byte(static_cast<std::uint8_t>(row % 2 == 0 ? 4 : 6)); // 18 pushes
            for (int i = 0; i < 18; ++i)
                sd.value(cost_at(static_cast<std::uint64_t>(200 + i))).byte(0x20);
            for (const std::uint8_t b : field_changes[row]) sd.byte(b);
            write(dir, "fields-" + std::to_string(&options - built) + "-" + std::to_string(row),
                  sd.bytes());
        }
    int k = 0;
    for (const opts& options : built)
        for (const auto& mutation : mutations)
            for (const int mode : {2, 3}) {
                seed sd;
                sd.byte(static_cast<std::uint8_t>(mode)).byte(0).byte(20).options(options);
                sd.byte(9).byte(
                    static_cast<std::uint8_t>((k % 3) | 4)); // 18 pushes; pop, finish, drain
                for (int i = 0; i < 18; ++i)
                    sd.value(cost_at(static_cast<std::uint64_t>(100 + i))).byte(0x20);
                for (const std::uint8_t b : mutation) sd.byte(b);
                write(dir, "mutated-" + std::to_string(++k), sd.bytes());
            }
}

// The calibration target's seeds (calibration.fuzz.cpp reads them): options, calibration
// settings, a prior and a true cost model, then a stream of records whose batches get their times.
struct calibration_seed {
    std::uint8_t batch_size = 4, lookahead = 2;
    bool sliding = false, drop_last = false, shuffled = false, padded = false;
    bool full = false, truncate = false;
    std::uint8_t cap = 0;        // 0 none, 1 fixed (value 40), 2 quantile p90 warm-up 5
    std::uint8_t budget = 0;     // full only: a memory budget of this much (0: none)
    std::uint8_t forgetting = 0; // indices into the target's tables
    std::uint8_t prior_weight = 0;
    std::uint8_t horizon = 31; // 1 + horizon % 50 (200 and above: + 250)
    std::uint8_t threshold = 0;
    std::array<std::uint8_t, 3> prior{0, 17, 0};   // 16 + an index into the coefficient table
    std::array<std::uint8_t, 3> truth{17, 17, 16}; // 1 + L: 0 is code 0
};

// The coefficient table's codes (calibration.fuzz.cpp, pick_coefficient).
constexpr std::uint8_t coef_zero = 0, coef_one = 17, coef_half = 18, coef_per_24576 = 19,
                       coef_two = 20, coef_tiny = 21, coef_dbl_min = 22, coef_huge = 23,
                       coef_1e100 = 24, coef_1e_9 = 25, coef_three = 26, coef_million = 27,
                       coef_milli = 28;

seed calibration_options(const calibration_seed& c) {
    seed s;
    s.byte(static_cast<std::uint8_t>(c.batch_size - 1))
        .byte(static_cast<std::uint8_t>(c.lookahead - 1));
    s.byte(static_cast<std::uint8_t>((c.sliding ? 1 : 0) | (c.drop_last ? 2 : 0) |
                                     (c.shuffled ? 4 : 0) | (c.full ? 16 : 0) |
                                     (c.truncate ? 32 : 0) | (c.padded ? 64 : 0)));
    s.byte(1).byte(1).u16(11); // buffer_windows 2, max_age 2, seed 11
    if (c.cap == 0) s.byte(0);
    if (c.cap == 1) s.byte(1).value(40.0);
    if (c.cap == 2) s.byte(5).byte(5); // 5 % 3 = 2: quantile, (5 >> 2) % 16 = 1: 0.9; warm-up 5
    if (c.full) s.byte(c.budget == 0 ? 0 : static_cast<std::uint8_t>(128 | c.budget));
    s.byte(c.forgetting).byte(c.prior_weight).byte(c.horizon).byte(c.threshold);
    for (const std::uint8_t p : c.prior) s.byte(p);
    for (const std::uint8_t t : c.truth) s.byte(t);
    return s;
}

void calibration_seeds(const std::filesystem::path& dir) {
    struct named {
        const char* name;
        calibration_seed c;
    };
    calibration_seed sliding;
    sliding.sliding = true;
    calibration_seed padded = sliding;
    padded.padded = true;
    padded.shuffled = true;
    calibration_seed quadratic; // the prior misses the quadratic term the truth has
    quadratic.prior = {coef_zero, coef_one, coef_zero};
    quadratic.truth = {coef_two, coef_one, coef_per_24576};
    calibration_seed forget_all = sliding; // forgetting 1e-300, prior weight 1e12
    forget_all.forgetting = 4;
    forget_all.prior_weight = 2;
    calibration_seed never_forget; // forgetting 1, prior weight 0, tiny outlier threshold
    never_forget.forgetting = 1;
    never_forget.prior_weight = 1;
    never_forget.threshold = 1;
    never_forget.truth = {coef_three, coef_half, coef_milli};
    calibration_seed short_horizon = sliding; // horizon 1, huge threshold
    short_horizon.horizon = 0;
    short_horizon.threshold = 4;
    calibration_seed capped = sliding;
    capped.cap = 2;
    capped.lookahead = 4;
    calibration_seed truncated;
    truncated.full = true;
    truncated.truncate = true;
    truncated.cap = 1;
    calibration_seed budget = sliding;
    budget.full = true;
    budget.budget = 40;
    calibration_seed extreme_prior; // a tiny constant, a huge linear term: most lengths refused
    extreme_prior.prior = {coef_tiny, coef_1e100, coef_zero};
    extreme_prior.truth = {coef_million, coef_1e_9, coef_zero};
    calibration_seed tiny_prior = sliding; // the smallest normal prior, times in hours
    tiny_prior.prior = {coef_dbl_min, coef_zero, coef_zero};
    tiny_prior.truth = {coef_huge, coef_zero, coef_zero};
    calibration_seed long_horizon = sliding;
    long_horizon.horizon = 249; // 1 + 249 % 50 + 250 = 300
    long_horizon.batch_size = 2;
    const named configs[] = {{"tumbling", calibration_seed{}},
                             {"sliding", sliding},
                             {"padded", padded},
                             {"quadratic", quadratic},
                             {"forget-all", forget_all},
                             {"never-forget", never_forget},
                             {"short-horizon", short_horizon},
                             {"quantile-cap", capped},
                             {"truncated", truncated},
                             {"budget", budget},
                             {"extreme-prior", extreme_prior},
                             {"tiny-prior", tiny_prior},
                             {"long-horizon", long_horizon}};
    // Operations as the target reads them.
    // A length as pick_length reads it: 0..31 in one byte, else a multiple of 1/64 up to 1023;
    // memory 2, truncated to half.
    const auto push = [](seed& s, double length) {
        if (length < 32.0 && length == std::floor(length))
            s.byte(0).byte(static_cast<std::uint8_t>(length));
        else
            s.byte(0).byte(128).u16(static_cast<std::uint16_t>(length * 64.0));
        s.byte(0x20);
    };
    const auto drain = [](seed& s) { s.byte(128); };
    const auto observe = [](seed& s, std::uint8_t how, std::uint8_t k, std::uint8_t time) {
        s.byte(148).byte(how).byte(k).byte(time);
    };
    std::uint64_t next = 0;
    for (const named& n : configs) {
        // Eager: every batch's true time right after it leaves; bad times and indices in between;
        // a save and restore through the bytes in the middle of the fit; a flipped byte.
        seed eager = calibration_options(n.c);
        for (int i = 0; i < 48; ++i) {
            push(eager, std::floor(cost_at(next++)));
            drain(eager);
            observe(eager, 0, 0, 0); // the newest batch, its true time
            if (i % 12 == 5) {
                observe(eager, 0, 0, 240); // NaN
                observe(eager, 3, 0, 1);   // a batch not emitted yet
                observe(eager, 6, 0, 0);   // one already observed
                observe(eager, 5, 0, 0);   // beyond the horizon
                observe(eager, 0, 1, 210); // an outlier: 3 times too slow
            }
            if (i == 20) eager.byte(216).byte(2); // restore
            if (i == 30) eager.byte(232).byte(3).u16(static_cast<std::uint16_t>(i)).byte(4).byte(3);
        }
        eager.byte(144).byte(128).byte(200).byte(0);
        write(dir, std::string("eager-") + n.name, eager.bytes());

        // Late: times arrive in bursts, oldest first, some of them noisy.
        seed late = calibration_options(n.c);
        for (int i = 0; i < 40; ++i) {
            push(late, std::floor(cost_at(next++) * 3.0));
            if (i % 4 == 3) drain(late);
            if (i % 10 == 9) late.byte(200).byte(static_cast<std::uint8_t>(i % 20 == 9 ? 1 : 3));
            if (i == 25) late.byte(216).byte(1); // take_state, restored without the bytes
        }
        late.byte(144).byte(128).byte(200).byte(1).byte(228);
        write(dir, std::string("late-") + n.name, late.bytes());
    }
    // Lengths on the edges (0, huge, NaN, negative) and times on the edges (0, tiny, huge).
    for (const bool is_sliding : {false, true}) {
        calibration_seed c;
        c.sliding = is_sliding;
        seed s = calibration_options(c);
        const std::uint8_t lengths[] = {0, 176, 178, 192, 195, 200, 201, 203, 212, 239, 5, 7};
        const std::uint8_t times[] = {232, 233, 234, 235, 236, 237, 238, 239, 241, 242, 0, 130};
        for (int i = 0; i < 36; ++i) {
            s.byte(0).byte(lengths[i % 12]).byte(0x20);
            drain(s);
            observe(s, 0, 0, times[i % 12]);
        }
        s.byte(144).byte(128).byte(200).byte(2);
        write(dir, std::string("edges-") + (is_sliding ? "sliding" : "tumbling"), s.bytes());
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr,
                     "usage: %s <corpus dir>   (writes <dir>/balancer, <dir>/state and "
                     "<dir>/calibration)\n",
                     argv[0]);
        return 2;
    }
    const std::filesystem::path root(argv[1]);
    balancer_seeds(root / "balancer");
    state_seeds(root / "state");
    calibration_seeds(root / "calibration");
    return 0;
}
