// Writes the seed corpus of the fuzz targets: `bcl-fuzz-make-corpus <dir>` creates
// <dir>/balancer/, <dir>/state/, <dir>/calibration/, <dir>/epoch_rest/, <dir>/token_rest/,
// <dir>/stage_plan/ and <dir>/stage_balancer/ and fills them with a few dozen small inputs, each a
// sequence of the decisions the harnesses read (written by seed_writer.hpp, which reads each seed's
// options back with the harness's own reader and stops the program unless they are the ones the
// seed asks for). The output is deterministic; the repository's fuzz/corpus/ is this program's
// output, and the reproducers of past findings kept beside it (fuzz/corpus/calibration/finding-*).

#include "calibration_input.hpp"
#include "fuzz_support.hpp"
#include "seed_writer.hpp"

#include <bcl/balancer.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace bcl_fuzz;

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

// A balancer seed that starts with the options `o`, checked to read back as them.
seed with_options(const std::string& name, const seed::opts& o) {
    seed s;
    s.options(o);
    expect_options(name, s.bytes(), o);
    return s;
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
        // Enough records for two full rounds after the buffer first fills (wide windows too),
        // and at least 37 or 29.
        const int window = c.o.batch_size * c.o.lookahead;
        const int rounds = (c.o.sliding ? c.o.buffer_windows + 1 : 2) * window + 5;
        // Eager: pop after every push, save and restore twice (once through the bytes, once by
        // moving the records out), finish mid-way through a window. Memory estimates of 1 to
        // 15, so batches of 4 are over a budget of 40 now and then.
        seed eager = with_options(std::string("eager-") + c.name, c.o);
        for (int i = 0; i < std::max(37, rounds); ++i) {
            const auto estimate = static_cast<std::uint8_t>(1 + (i * 7) % 15);
            eager.push(cost_at(next++), estimate, i % 3 == 0).drain();
            if (i == 13) eager.restore(2);
            if (i == 29) eager.restore(3).save_only();
        }
        eager.finish().pop().restore(1).drain();
        write(dir, std::string("eager-") + c.name, eager.bytes());

        // Lazy: pop only when needed, with failed operations in between (invalid costs, pushes
        // while batches wait, a push after finish); memory estimates of 3 to 15.
        seed lazy = with_options(std::string("lazy-") + c.name, c.o);
        for (int i = 0; i < std::max(29, rounds); ++i) {
            lazy.push(cost_at(next++), static_cast<std::uint8_t>(3 + (i * 5) % 13));
            if (i % 9 == 4) lazy.push_special(192).push_special(195); // NaN, -1: refused
            if (i % 11 == 10) lazy.pop().push(1.0).pop();
        }
        lazy.finish().push(3.0).drain();
        write(dir, std::string("lazy-") + c.name, lazy.bytes());
    }
    // Adversarial valid costs: ties, zeros, -0, subnormals, DBL_MIN, 1e-300, 2^52 and 2^53 + 1,
    // and huge ones: the largest estimate the balancer accepts (bcl::max_estimate, 1e120, so
    // that no sum overflows) and half of it.
    for (const bool is_sliding : {false, true}) {
        opts o;
        o.sliding = is_sliding;
        const std::string policy = is_sliding ? "sliding" : "tumbling";
        seed s = with_options("tiny-and-huge-" + policy, o);
        const std::uint8_t codes[] = {176, 177, 178, 179, 180, 181, 216, 220, 187, 189, 190, 191};
        for (int i = 0; i < 24; ++i) s.push_special(codes[i % 12]).pop();
        s.finish().drain();
        write(dir, "tiny-and-huge-" + policy, s.bytes());
        // Runs of one value: ties, the largest accepted estimate and the one below it, and
        // values above it (DBL_MAX / 3, DBL_MAX), each refused.
        seed r = with_options("runs-" + policy, o);
        r.push_repeated(9, 5).push_repeated(12, 216).push_repeated(16, 201).push_repeated(10, 217);
        r.push_repeated(5, 183).finish().drain();
        write(dir, "runs-" + policy, r.bytes());
        // The first windows all at the largest accepted estimate: the largest sums a pack can
        // reach, then small costs beside them.
        seed v = with_options("max-estimate-first-" + policy, o);
        v.push_repeated(20, 216).push_repeated(6, 4).restore(2).finish().drain();
        write(dir, "max-estimate-first-" + policy, v.bytes());
        seed t = with_options("all-equal-" + policy, o);
        for (int i = 0; i < 20; ++i) t.push(5.0).push(5.0).pop();
        t.restore(0).finish().drain();
        write(dir, "all-equal-" + policy, t.bytes());
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
    // Each row: the number of mutations (1 + first % 8), then per mutation its kind, the field
    // (one byte below 192: that field among the first 48) and its argument, as mutate() in
    // state.fuzz.cpp reads them.
    const std::vector<std::uint8_t> mutations[] = {
        {0, 1, 5, 12},        // field 5 (the seed) := 2^53
        {0, 3, 40, 255},      // field 40 minus 1
        {0, 2, 30, 192},      // field 30 := NaN
        {1, 6, 45, 1, 17, 1}, // field 45 erased, then field 17 := 1
    };
    // Mode 4: a built state whose decoded fields change. Each row: the number of changes
    // (1 + first % 4), then per change its kind and arguments, as mutate_fields() reads them.
    const std::vector<std::uint8_t> field_changes[] = {
        {0, 0, 15},    // heavy_seen := 2^63
        {0, 1, 17},    // stats.batches := 2^64 - 2
        {0, 7, 13, 1}, // 2^62 + 5 records more before buffered record 1
        {1, 6, 3, 5},  // 3 records more dropped (and pushed); drop_last toggled
        {0, 18, 2},    // buffered record 2 counted as handed out
        {0, 11, 9},    // waiting records: 2^26 mod 4096 = 0
    };
    // The mode, the two restore choices (how 0, 20 pushes), the options (checked to read back
    // as `with`), 18 pushes and what follows them (see build_state), their costs from `first`.
    const auto built_state = [](const std::string& name, std::uint8_t mode, const opts& with,
                                std::uint8_t after, std::uint64_t first) {
        seed sd;
        sd.byte(mode).byte(0).byte(20).options(with);
        expect_options(name, std::span(sd.bytes()).subspan(3), with);
        sd.byte(9).byte(after); // 18 pushes
        for (std::uint64_t i = 0; i < 18; ++i) sd.value(cost_at(first + i)).byte(0x20);
        return sd;
    };
    for (std::size_t b = 0; b < std::size(built); ++b)
        for (std::size_t row = 0; row < std::size(field_changes); ++row) {
            const std::string name = "fields-" + std::to_string(b) + "-" + std::to_string(row);
            // after: one pop at the end (4), and every other row finished first (2)
            seed sd = built_state(name, 4, built[b], row % 2 == 0 ? 4 : 6, 200);
            for (const std::uint8_t x : field_changes[row]) sd.byte(x);
            write(dir, name, sd.bytes());
        }
    int k = 0;
    for (const opts& options : built)
        for (const auto& mutation : mutations)
            for (const std::uint8_t mode : {std::uint8_t{2}, std::uint8_t{3}}) {
                const std::string name = "mutated-" + std::to_string(++k);
                // after: pop eagerly (1) or finish (2) or neither, then one pop (4)
                seed sd = built_state(name, mode, options,
                                      static_cast<std::uint8_t>(((k - 1) % 3) | 4), 100);
                for (const std::uint8_t x : mutation) sd.byte(x);
                write(dir, name, sd.bytes());
            }
}

// The calibration target's seeds (calibration.fuzz.cpp reads them): options, calibration
// settings, a prior and a true cost model (calibration_seed), then a stream of records whose
// batches get their times.
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
    quadratic.prior = {0.0, 1.0, 0.0};
    quadratic.truth = {2.0, 1.0, 1.0 / 24576.0};
    calibration_seed forget_all = sliding;
    forget_all.forgetting = 1e-300;
    forget_all.prior_weight = 1e12;
    calibration_seed never_forget; // and a tiny outlier threshold
    never_forget.forgetting = 1.0;
    never_forget.prior_weight = 0.0;
    never_forget.outlier_threshold = 1e-300;
    never_forget.truth = {3.0, 0.5, 1e-3};
    calibration_seed short_horizon = sliding; // and a huge outlier threshold
    short_horizon.horizon = 1;
    short_horizon.outlier_threshold = DBL_MAX;
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
    extreme_prior.prior = {1e-300, 1e100, 0.0};
    extreme_prior.truth = {1e6, 1e-9, 0.0};
    calibration_seed tiny_prior = sliding; // the smallest normal prior, huge times
    tiny_prior.prior = {DBL_MIN, 0.0, 0.0};
    tiny_prior.truth = {1e300, 0.0, 0.0};
    calibration_seed long_horizon = sliding;
    long_horizon.horizon = 300;
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
    // truncated to half; a memory estimate of 2 to 12 (so batches of 4 are over a budget of 40
    // now and then), the i-th.
    const auto push = [](seed& s, double length, int i) {
        if (length < 32.0 && length == std::floor(length))
            s.byte(0).byte(static_cast<std::uint8_t>(length));
        else
            s.byte(0).byte(128).u16(static_cast<std::uint16_t>(length * 64.0));
        s.byte(static_cast<std::uint8_t>((2 + (i * 5) % 11) << 4));
    };
    const auto drain = [](seed& s) { s.byte(128); };
    // observe(index, time): how and k choose the index (pick_index), then the time's code. The
    // target reads a time code one way for a batch emitted and another for an index not emitted
    // yet (pick_time), and the seed cannot know which it is: only codes that take the same bytes
    // either way keep the rest of the seed in step (0-15, 128-143, 160-175 and 224-239 alone,
    // 248-255 followed by a pick_value code).
    const auto observe = [](seed& s, std::uint8_t how, std::uint8_t k, std::uint8_t time) {
        s.byte(148).byte(how).byte(k).byte(time);
    };
    std::uint64_t next = 0;
    for (const named& n : configs) {
        // Eager: every batch's true time right after it leaves; bad times and indices in between;
        // a save and restore through the bytes in the middle of the fit; a flipped byte.
        const std::string eager_name = std::string("eager-") + n.name;
        seed eager = calibration_setup(n.c);
        expect_setup(eager_name, eager.bytes(), n.c);
        for (int i = 0; i < 48; ++i) {
            push(eager, std::floor(cost_at(next++)), i);
            drain(eager);
            observe(eager, 0, 0, 0); // the newest batch, its true time
            if (i % 12 == 5) {
                // The one before the newest, which no time went to yet (rounds emit K >= 2
                // batches): NaN (code 248 reads it through pick_value, with or without a batch)
                // is refused, then 30 times its true time, an outlier.
                observe(eager, 0, 1, 248);
                eager.byte(192);
                observe(eager, 0, 1, 224);
                observe(eager, 3, 0, 1); // a batch not emitted yet (-0)
                observe(eager, 6, 0, 0); // one already observed
                observe(eager, 5, 0, 0); // beyond the horizon if any batch is, else batch 0
            }
            if (i == 20) eager.byte(216).byte(2); // restore
            if (i == 30) eager.byte(232).byte(3).u16(static_cast<std::uint16_t>(i)).byte(4).byte(3);
        }
        eager.byte(144).byte(128).byte(200).byte(0);
        write(dir, eager_name, eager.bytes());

        // Late: times arrive in bursts, oldest first, every other burst after noisy times (5%
        // slow) for the four newest batches.
        const std::string late_name = std::string("late-") + n.name;
        seed late = calibration_setup(n.c);
        expect_setup(late_name, late.bytes(), n.c);
        for (int i = 0; i < 40; ++i) {
            push(late, std::floor(cost_at(next++) * 3.0), i);
            if (i % 4 == 3) drain(late);
            if (i % 20 == 19)
                for (std::uint8_t k = 0; k < 4; ++k) observe(late, 0, k, 165);
            if (i % 10 == 9) late.byte(200).byte(1); // every waiting batch: its true time
            if (i == 25) late.byte(216).byte(1);     // take_state, restored without the bytes
        }
        late.byte(144).byte(128).byte(200).byte(1).byte(228);
        write(dir, late_name, late.bytes());
    }
    // Lengths on the edges (0, huge, NaN, negative) and times on the edges (0, tiny, huge).
    for (const bool is_sliding : {false, true}) {
        calibration_seed c;
        c.sliding = is_sliding;
        const std::string name = std::string("edges-") + (is_sliding ? "sliding" : "tumbling");
        seed s = calibration_setup(c);
        expect_setup(name, s.bytes(), c);
        const std::uint8_t lengths[] = {0, 176, 178, 192, 195, 200, 201, 203, 212, 239, 5, 7};
        // Times the target must refuse, through pick_value: +inf, -inf, NaN, -1, -denorm_min.
        const std::uint8_t refused[] = {193, 194, 192, 195, 196};
        // Times it must take: 0, -0, the smallest subnormal, DBL_MIN, 1e-300, DBL_MAX, 1e300,
        // 1e150, the true time, 1% slow.
        const std::uint8_t taken[] = {232, 233, 234, 235, 236, 237, 238, 239, 0, 130};
        for (int i = 0; i < 36; ++i) {
            s.byte(0).byte(lengths[i % 12]).byte(0x20);
            drain(s);
            // A refused time for the newest batch and the one before (awaiting theirs when a
            // round has just emitted them), then one taken for each.
            for (std::uint8_t k = 0; k < 2; ++k) {
                observe(s, 0, k, 248);
                s.byte(refused[(i + k) % 5]);
            }
            for (std::uint8_t k = 0; k < 2; ++k) observe(s, 0, k, taken[(i + k) % 10]);
        }
        s.byte(144).byte(128).byte(200).byte(2);
        write(dir, name, s.bytes());
    }
}

} // namespace

// epoch_rest: parts as a resumed job writes them (a rest in the middle of an epoch, the whole
// epoch, an empty rest) and as damage leaves them (a bitmap a byte short or long, a bit past the
// span, the start taken), each followed by a chain of takes.
void epoch_rest_seeds(const std::filesystem::path& dir) {
    const auto takes = [](seed s) {
        for (int link = 0; link < 3; ++link) {
            s.u16(static_cast<std::uint16_t>(5 + 7 * link)).byte(6);
            for (std::uint8_t k = 0; k < 6; ++k) s.byte(static_cast<std::uint8_t>(3 * k + 1));
        }
        return s;
    };
    // n, start, span, the bitmap's shape (see the harness), then its bytes.
    write(dir, "middle",
          takes(seed().u16(300).u16(40).u16(20).byte(3).byte(0x5A).byte(0x33).byte(0x05)).bytes());
    write(dir, "whole", takes(seed().u16(500).u16(0).u16(0).byte(0)).bytes());
    write(dir, "empty", seed().u16(64).u16(64).u16(0).byte(0).bytes());
    write(dir, "short-bitmap", seed().u16(300).u16(40).u16(20).byte(2).byte(0).byte(0).bytes());
    write(dir, "long-bitmap",
          seed().u16(300).u16(40).u16(20).byte(1).byte(0).byte(0).byte(0).byte(0).bytes());
    write(dir, "bit-past-span", seed().u16(300).u16(40).u16(9).byte(0).byte(0).byte(0xF0).bytes());
    write(dir, "start-taken", seed().u16(300).u16(40).u16(8).byte(0).byte(0x01).bytes());
}

// token_rest: small token epochs (n, R, T, m, M / m, K, the ending: 0 empty micro-batches, 1
// repetition, 2 refusal, +4 a record above T alone; seed, epoch, then one byte per length), then
// a position, the saving rank and the new number of ranks: an epoch of
// empty padding resized at a step boundary and within one, one padded by repetition, one with a
// record above T alone, one of a single rank grown to five.
void token_rest_seeds(const std::filesystem::path& dir) {
    const auto epoch = [](std::uint16_t n, std::uint8_t ranks, std::uint16_t t, std::uint8_t m,
                          std::uint8_t micro, std::uint8_t k, std::uint8_t ending) {
        seed s;
        s.u16(static_cast<std::uint16_t>(n - 1)).byte(static_cast<std::uint8_t>(ranks - 1));
        s.u16(static_cast<std::uint16_t>(t - 1));
        s.byte(static_cast<std::uint8_t>(m - 1)).byte(static_cast<std::uint8_t>(micro - 1));
        s.byte(static_cast<std::uint8_t>(k - 1)).byte(ending).byte(7).byte(2);
        for (std::uint16_t i = 0; i < n; ++i)
            s.byte(static_cast<std::uint8_t>(i % 9 == 0 ? 220 : (37 * i) % 200));
        return s;
    };
    write(dir, "empty-at-boundary", epoch(120, 3, 400, 1, 2, 2, 0).u16(4).byte(1).byte(4).bytes());
    write(dir, "empty-within-step", epoch(120, 3, 400, 1, 2, 2, 0).u16(5).byte(0).byte(1).bytes());
    write(dir, "repeat", epoch(97, 4, 300, 1, 1, 3, 1).u16(6).byte(2).byte(2).bytes());
    write(dir, "oversized-alone", epoch(80, 2, 100, 2, 1, 1, 6).u16(8).byte(1).byte(3).bytes());
    write(dir, "one-rank-to-five", epoch(60, 1, 200, 1, 1, 2, 0).u16(3).byte(0).byte(4).bytes());
}

// stage_plan: D, R, B, K, the planner (0 held, 1 window, 2 tokens), the records a rank, then
// each record's D costs (pick_value's bytes) and, for token plans, T and the tokens: a
// vision-language-like held batch and window, a table of one stage, one with a NaN, one near
// bcl::max_estimate, and a token plan with a record above T.
void stage_plan_seeds(const std::filesystem::path& dir) {
    const auto table = [](std::uint8_t d, std::uint8_t ranks, std::uint8_t batch,
                          std::uint8_t steps, std::uint8_t planner, std::uint8_t per_rank,
                          std::uint8_t odd) {
        seed s;
        s.byte(static_cast<std::uint8_t>(d - 1)).byte(static_cast<std::uint8_t>(ranks - 1));
        s.byte(static_cast<std::uint8_t>(batch - 1)).byte(static_cast<std::uint8_t>(steps - 1));
        s.byte(planner).byte(static_cast<std::uint8_t>(per_rank - 1));
        const std::size_t values = std::size_t{d} * ranks * per_rank;
        for (std::size_t k = 0; k < values; ++k) {
            // Mostly small integers; every ninth a heavy fraction; `odd` at the fifth value.
            if (k == 5 && odd != 0) {
                s.byte(odd);
            } else if (k % 9 == 4) {
                s.byte(150).u16(static_cast<std::uint16_t>(4000 + 977 * k));
            } else {
                s.byte(static_cast<std::uint8_t>((k * 37) % 112));
            }
        }
        return s;
    };
    write(dir, "held-two-stages", table(2, 4, 4, 2, 0, 8, 0).bytes());
    write(dir, "window-three-stages", table(3, 3, 2, 4, 1, 8, 0).bytes());
    write(dir, "one-stage", table(1, 5, 3, 3, 1, 9, 0).bytes());
    write(dir, "nan-cost", table(2, 2, 2, 2, 0, 4, 192).bytes());          // edge_values[16]
    write(dir, "near-max-estimate", table(2, 2, 3, 2, 1, 6, 216).bytes()); // 1e120
    seed tokens = table(2, 3, 4, 2, 2, 6, 0);
    tokens.u16(200);
    for (std::uint8_t k = 0; k < 18; ++k)
        tokens.byte(k == 7 ? 250 : static_cast<std::uint8_t>(11 * k));
    tokens.byte(0);
    write(dir, "tokens-one-above-t", tokens.bytes());
}

// stage_balancer: D (0: one stage, 1: two, 2: three), B, K, the option flags (bit 0 sliding, 1
// drop_last, 2 shuffled, 3 largest_first, 4-5 buffer_windows - 1, 6-7 max_age's slack), the seed,
// stage means or none, then operations (0-2 push and the record's D costs, 3 pop, 4 finish, 5
// save and restore, 6 restore a changed state, 7 next epoch): a sliding run of two stages with a
// save mid-epoch, a tumbling one with drop_last and a NaN, one whose estimator throws, and one
// restoring a state with a changed count.
void stage_balancer_seeds(const std::filesystem::path& dir) {
    const auto run = [](std::uint8_t d, std::uint8_t b, std::uint8_t k, std::uint8_t flags,
                        std::uint8_t records, std::uint8_t odd_at, std::uint8_t odd) {
        seed s;
        s.byte(d).byte(static_cast<std::uint8_t>(b - 1)).byte(static_cast<std::uint8_t>(k - 1));
        s.byte(flags).byte(5).byte(0);
        for (std::uint8_t i = 0; i < records; ++i) {
            s.byte(i == odd_at && odd == 255 ? 255 : 0);
            for (std::uint8_t c = 0; c <= d; ++c)
                s.byte(i == odd_at && c == 0 && odd != 255
                           ? odd
                           : static_cast<std::uint8_t>((i * 7 + c * 5) % 16));
            if (i % 5 == 4) s.byte(3);           // pop what is ready
            if (i == records / 2) s.byte(5 | 8); // save a copy and go on from it
        }
        return s.byte(4).byte(3).byte(7).byte(0).byte(9).byte(1).byte(2).byte(4).byte(3);
    };
    write(dir, "sliding-two-stages-saved", run(1, 3, 2, 0x11, 40, 99, 0).bytes());
    write(dir, "tumbling-drop-last-nan", run(2, 4, 3, 0x02, 23, 6, 192).bytes());
    write(dir, "estimator-throws", run(1, 2, 2, 0x05, 17, 3, 255).bytes());
    seed changed = run(0, 2, 3, 0x21, 20, 99, 0);
    write(dir, "changed-state", changed.byte(6).byte(0).byte(1).byte(6).byte(6).byte(2).bytes());
}

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr,
                     "usage: %s <corpus dir>   (writes <dir>/balancer, <dir>/state, "
                     "<dir>/calibration, <dir>/epoch_rest, <dir>/token_rest, "
                     "<dir>/stage_plan and <dir>/stage_balancer)\n",
                     argv[0]);
        return 2;
    }
    const std::filesystem::path root(argv[1]);
    balancer_seeds(root / "balancer");
    state_seeds(root / "state");
    calibration_seeds(root / "calibration");
    epoch_rest_seeds(root / "epoch_rest");
    token_rest_seeds(root / "token_rest");
    stage_plan_seeds(root / "stage_plan");
    stage_balancer_seeds(root / "stage_balancer");
    return 0;
}
