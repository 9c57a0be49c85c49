#pragma once
// What the libtorch samplers' tests share: a table of lengths and its cost, the keyed order a
// distributed sampler draws, draining a sampler, carrying one through archive bytes, taking an
// archive apart to alter it, and requiring that a load is refused and changes nothing (of either
// sampler).

#include <bcl/bcl.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace sampler_support {

using Catch::Matchers::Contains;
using torch::data::samplers::DistributedRandomSampler;
using torch::data::samplers::DistributedSequentialSampler;
using torch::data::samplers::RandomSampler;
using torch::data::samplers::SequentialSampler;
using index_batch = std::vector<std::size_t>;
using int64s = std::vector<std::int64_t>;

// A table of token counts: items of 10..400 tokens, scattered by a multiplicative hash, and, if
// `heavy`, every 37th item 600 tokens long.
inline std::vector<std::size_t> make_lengths(std::size_t n, bool heavy = true) {
    std::vector<std::size_t> lengths(n);
    for (std::size_t i = 0; i < n; ++i)
        lengths[i] = heavy && i % 37 == 0 ? 600 : 10 + (i * 2654435761U) % 391;
    return lengths;
}

// The cost of a dataset index: its length plus an attention-like quadratic term.
inline auto length_cost(const std::vector<std::size_t>& lengths) {
    return bcl::affine_quadratic(0.0, 1.0, 1.0 / 256,
                                 [&lengths](std::size_t i) { return lengths.at(i); });
}
using length_cost_type = decltype(length_cost(std::declval<const std::vector<std::size_t>&>()));

// The order a distributed sampler with epoch_order_kind::keyed must draw: bcl::keyed_order(n,
// seed, epoch) read position by position, 0..n-1, as Python's _core.keyed_order(n, seed, epoch,
// 0, n) reads it (python/src/core.cpp); 0..n-1 itself without shuffle.
inline index_batch keyed_reference_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch,
                                         bool shuffle) {
    index_batch order(n);
    const bcl::keyed_order keyed(n, seed, epoch);
    for (std::size_t p = 0; p < n; ++p) order[p] = shuffle ? keyed.at(p) : p;
    return order;
}

template <class Sampler>
std::vector<index_batch> drain(Sampler& sampler, std::size_t batch_size) {
    std::vector<index_batch> out;
    while (torch::optional<index_batch> b = sampler.next(batch_size)) out.push_back(std::move(*b));
    return out;
}

inline index_batch sorted_concat(const std::vector<index_batch>& batches) {
    index_batch all;
    for (const index_batch& b : batches) all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    return all;
}

inline std::string archive_bytes(torch::serialize::OutputArchive& archive) {
    std::ostringstream bytes;
    archive.save_to(bytes);
    return bytes.str();
}

template <class Sampler>
void load_bytes(Sampler& sampler, const std::string& bytes) {
    torch::serialize::InputArchive in;
    std::istringstream stream(bytes);
    in.load_from(stream);
    sampler.load(in);
}

template <class Sampler>
std::string saved_bytes(const Sampler& sampler) {
    torch::serialize::OutputArchive out;
    sampler.save(out);
    return archive_bytes(out);
}

// An archive taken apart into its tensors, to alter and put back together: the top level's (the
// bcl_ fields) and the nested inner sampler's (a balanced_sampler's; a
// distributed_balanced_sampler's archive has none: `nested` false).
struct archive_parts {
    std::map<std::string, torch::Tensor> fields;
    std::map<std::string, torch::Tensor> inner;
    bool nested = true;

    static archive_parts of(const std::string& bytes, bool nested = true) {
        torch::serialize::InputArchive in;
        std::istringstream stream(bytes);
        in.load_from(stream);
        archive_parts parts;
        parts.nested = nested;
        read_tensors(in, parts.fields);
        if (!nested) return parts;
        torch::serialize::InputArchive inner_archive;
        REQUIRE(in.try_read("inner", inner_archive));
        read_tensors(inner_archive, parts.inner);
        return parts;
    }

    // The archive's bytes. With `reseal`, bcl_digest is first recomputed over the bcl_ fields as
    // they are now: what someone who knows bcl's code can do.
    [[nodiscard]] std::string bytes(bool reseal) const {
        std::map<std::string, torch::Tensor> out_fields = fields;
        if (reseal) {
            bcl::torch::detail::archive_digest digest;
            for (const auto& [key, t] : fields)
                if (key != "bcl_digest") digest.add(key, t);
            out_fields["bcl_digest"] = tensor({std::bit_cast<std::int64_t>(digest.value())});
        }
        torch::serialize::OutputArchive out;
        if (nested) {
            torch::serialize::OutputArchive inner_archive(out.compilation_unit());
            for (const auto& [key, t] : inner) inner_archive.write(key, t, /*is_buffer=*/true);
            out.write("inner", inner_archive);
        }
        for (const auto& [key, t] : out_fields) out.write(key, t, /*is_buffer=*/true);
        return archive_bytes(out);
    }

    [[nodiscard]] int64s ints(const std::string& key) const {
        const torch::Tensor t = fields.at(key).contiguous();
        return int64s(t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel());
    }
    void set(const std::string& key, const int64s& values) { fields[key] = tensor(values); }

    static torch::Tensor tensor(const int64s& values) {
        return torch::tensor(values, torch::kInt64).reshape({-1}).clone();
    }

private:
    static void read_tensors(torch::serialize::InputArchive& in,
                             std::map<std::string, torch::Tensor>& out) {
        for (const std::string& key : in.keys()) {
            c10::IValue value;
            if (in.try_read(key, value) && value.isTensor())
                out[key] = value.toTensor().contiguous().clone();
        }
    }
};

// A RandomSampler's reset() draws from libtorch's generator: seeded alike, samplers made alike
// reset alike.
template <class Sampler>
void seeded_reset(Sampler& s) {
    torch::manual_seed(11);
    s.reset();
}

// The archive of `s` after `epochs` whole epochs and `taken` batches of the next, with that
// epoch's batches before the save (`handed`) and after it (`rest`).
struct saved_point {
    std::string bytes;
    std::vector<index_batch> handed;
    std::vector<index_batch> rest;
};

template <class Sampler>
saved_point save_after(Sampler s, std::size_t taken, std::size_t epochs = 0) {
    saved_point p;
    const std::size_t b = s.settings().batch_size;
    for (std::size_t e = 0; e < epochs; ++e) {
        drain(s, b);
        seeded_reset(s);
    }
    for (std::size_t k = 0; k < taken; ++k) {
        torch::optional<index_batch> x = s.next(b);
        if (!x) break;
        p.handed.push_back(std::move(*x));
    }
    p.bytes = saved_bytes(s);
    p.rest = drain(s, b);
    return p;
}

// The archive of a sampler made by `make` after `taken` batches, required to resume exactly in
// another sampler made alike.
template <class Make>
saved_point require_resumes(const Make& make, std::size_t taken) {
    saved_point genuine = save_after(make(), taken);
    auto restored = make();
    load_bytes(restored, genuine.bytes);
    REQUIRE(drain(restored, restored.settings().batch_size) == genuine.rest);
    return genuine;
}

// Moves a sampler away from where it was made: to epoch 3, two batches in.
template <class Sampler>
void move_elsewhere(Sampler& s) {
    s.set_epoch(3);
    seeded_reset(s);
    for (int k = 0; k < 2; ++k) (void)s.next(s.settings().batch_size);
}

// Whether two samplers are on the same course: the same epoch and mean cost, and the same
// batches through this epoch and the next. Drains both.
template <class Sampler>
bool same_course(Sampler& a, Sampler& b) {
    const std::size_t size = a.settings().batch_size;
    if (a.epoch() != b.epoch() || a.mean_cost() != b.mean_cost()) return false;
    if (drain(a, size) != drain(b, size)) return false;
    seeded_reset(a);
    seeded_reset(b);
    return drain(a, size) == drain(b, size);
}

// Loads `bytes` into a sampler made by `make` and moved elsewhere by `move`, and requires a
// bcl::error whose message has each of `names`; then that the sampler is on the course of a twin
// that never saw the archive, as `same` compares them.
template <class Make, class Move, class Same>
void require_refused_by(const Make& make, const std::string& bytes,
                        const std::vector<std::string>& names, const Move& move, const Same& same) {
    auto target = make();
    auto twin = make();
    move(target);
    move(twin);
    bool refused = false;
    try {
        load_bytes(target, bytes);
    } catch (const bcl::error& e) {
        refused = true;
        const std::string what = e.what();
        CAPTURE(what);
        for (const std::string& name : names) CHECK_THAT(what, Contains(name));
    }
    REQUIRE(refused);
    REQUIRE(same(target, twin));
}

// require_refused_by for the rank-local sampler.
template <class Make>
void require_refused(const Make& make, const std::string& bytes,
                     const std::vector<std::string>& names) {
    require_refused_by(
        make, bytes, names, [](auto& s) { move_elsewhere(s); },
        [](auto& a, auto& b) { return same_course(a, b); });
}

// Moves a distributed sampler away from where it was made: to epoch 3, two batches in.
inline void move_distributed(bcl::torch::distributed_balanced_sampler& s) {
    s.set_epoch(3);
    s.reset();
    for (int k = 0; k < 2; ++k) (void)s.next(s.batch_size());
}

// Whether two distributed samplers are on the same course: the same epoch, position and batches
// through this epoch and the next. Drains both.
inline bool same_distributed_course(bcl::torch::distributed_balanced_sampler& a,
                                    bcl::torch::distributed_balanced_sampler& b) {
    if (a.epoch() != b.epoch() || a.position() != b.position()) return false;
    if (drain(a, a.batch_size()) != drain(b, b.batch_size())) return false;
    a.reset();
    b.reset();
    return a.epoch() == b.epoch() && a.digest() == b.digest() &&
           drain(a, a.batch_size()) == drain(b, b.batch_size());
}

// require_refused_by for the distributed sampler.
template <class Make>
void require_distributed_refused(const Make& make, const std::string& bytes,
                                 const std::vector<std::string>& names) {
    require_refused_by(make, bytes, names, move_distributed, same_distributed_course);
}

// A dataset whose examples are their own indices, so a loader's batches are the sampler's.
class index_dataset : public torch::data::datasets::Dataset<index_dataset, std::size_t> {
public:
    explicit index_dataset(std::size_t n) : m_n(n) {}
    std::size_t get(std::size_t index) override { return index; }
    [[nodiscard]] torch::optional<std::size_t> size() const override { return m_n; }

private:
    std::size_t m_n;
};

inline bcl::lookahead_policy policy_named(const std::string& name) {
    return name == "tumbling" ? bcl::lookahead_policy::tumbling : bcl::lookahead_policy::sliding;
}

} // namespace sampler_support
