// bcl-torch-train: real training over MPI, to measure what bcl::torch::balanced_sampler and
// bcl::torch::distributed_balanced_sampler buy.
//
// This example demonstrates bcl::torch::balanced_sampler and
// bcl::torch::distributed_balanced_sampler in a data-parallel libtorch trainer.
// Every MPI rank trains a small decoder-only transformer on CPU with real forward, backward and
// Adam steps, and averages its gradients with the other ranks in one MPI_Allreduce per step, so a
// step lasts as long as its slowest rank. Each batch holds exactly B sequences of random tokens
// whose lengths come from a real length distribution (scaled down so a step takes tenths of a
// second on one core), and every sequence is computed at its own length, without padding.
// Batches come through torch::data: a DistributedRandomSampler alone (`none`), wrapped in a
// balanced_sampler (`tumbling`, `sliding`), or a distributed_balanced_sampler planning every
// rank's batches from the cost table every rank holds (`global`; the ranks check once per stream
// that their plan digests agree).
//
// It runs the policies interleaved (blocks of steps in turn, in every repeat the same batches),
// records every rank's compute time per batch, fits t = a*n + b*sum L + c*sum L^2 to them, and
// reports per policy the measured time per step, the measured speedup against `none`, and the
// speedup bcl-sim's metrics predict from the recorded batches under the fitted model. On a
// machine shared with other jobs, the fit takes each batch's least compute time over the
// repeats (other jobs only add time); the measured step time is the plain mean, which the
// interleaving makes fair, and each step's least over the repeats is reported too.
//
//   mpirun -np 2 build-torch/bin/bcl-torch-train --format table
//
// Requires: libtorch, MPI (C API), CLI11, nlohmann-json, fmt. See docs/torch.md.
// Exit codes, the same on every rank: 0 success, 2 bad input (flags, length file), 1 anything
// else.

#include "length_file.hpp"
#include "metrics.hpp"

#include <bcl/bcl.hpp>
#include <bcl/names.hpp>
#include <bcl/torch/balanced_sampler.hpp>
#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// OpenBLAS starts a thread per core unless told otherwise; libtorch's thread settings do not
// reach it. Declared weak: with another BLAS the symbol is simply absent.
extern "C" void openblas_set_num_threads(int threads) __attribute__((weak));

namespace {

using clock_type = std::chrono::steady_clock;
using index_sampler = torch::data::samplers::DistributedRandomSampler;

/// Input the user can fix (a flag, the length file): reported with exit code 2.
struct bad_input : std::runtime_error {
    using std::runtime_error::runtime_error;
};

double seconds_since(clock_type::time_point start) {
    return std::chrono::duration<double>(clock_type::now() - start).count();
}

// CPU time of the calling thread: the compute alone, without the time other processes on a
// shared machine take the core away.
double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// ---------------------------------------------------------------------------------------------
// Settings.
// ---------------------------------------------------------------------------------------------

struct settings {
    std::vector<std::string> policies{"none", "tumbling", "sliding", "global"};
    std::size_t steps = 32;    // measured steps per policy in each repeat
    std::size_t repeats = 5;   // passes over the same batches, to show and beat the noise
    std::size_t block = 1;     // steps a policy runs before the next policy's turn
    std::size_t warmup = 4;    // unmeasured steps first (allocator, caches)
    std::size_t batch = 16;    // B
    std::size_t lookahead = 8; // K
    std::uint64_t seed = 1;
    double length_scale = 0.05;
    // c/b of the cost model the balancer uses, from a calibration on this machine (docs/torch.md):
    // a fit of this trainer's compute times gave b = 1.3e-4 s per token, c = 5.2e-7 s per token^2.
    double cost_c = 1.0 / 250;
    std::string lengths = BCL_TORCH_DEFAULT_LENGTHS;
    std::string format = "table";
    std::string fit_clock = "cpu";
    std::string global_order = "shared"; // the records `global` plans: none's, or its own shuffle
    std::string records;                 // CSV of every measured batch, if set
    bool calibrate = false;
    std::size_t layers = 2;
    std::size_t d_model = 128;
    std::size_t heads = 4;
    std::size_t vocab = 256;
};

void check_settings(const settings& s) {
    const auto need = [](bool ok, const std::string& what) {
        if (!ok) throw bad_input(what);
    };
    need(s.batch >= 1, "--batch must be at least 1");
    need(s.lookahead >= 1, "--lookahead must be at least 1");
    need(s.steps >= 1, "--steps must be at least 1");
    need(s.repeats >= 1, "--repeats must be at least 1");
    need(s.block >= 1, "--block must be at least 1");
    need(s.length_scale > 0.0 && std::isfinite(s.length_scale),
         "--length-scale must be finite and > 0");
    need(s.cost_c >= 0.0 && std::isfinite(s.cost_c), "--cost-c must be finite and >= 0");
    need(s.heads >= 1 && s.d_model % s.heads == 0, "--d-model must be a multiple of --heads");
    need(s.layers >= 1 && s.vocab >= 2, "--layers must be >= 1 and --vocab >= 2");
    for (const std::string& p : s.policies)
        need(p == "none" || p == "global" || bcl::find_named<bcl::lookahead_policy>(p),
             "--policy: '" + p + "' is not none, global or a lookahead policy (" +
                 bcl::names_text<bcl::lookahead_policy>() + ")");
}

// ---------------------------------------------------------------------------------------------
// Data: token counts from the length file, scaled; random tokens of those lengths.
// ---------------------------------------------------------------------------------------------

/// The length file's token counts (bench/common/length_file.hpp), each scaled by `scale`.
std::vector<std::size_t> read_lengths(const std::string& path, double scale) {
    std::vector<std::uint64_t> read;
    try {
        read = bcl_tools::read_length_file(path);
    } catch (const bcl_tools::length_file_error& e) {
        throw bad_input(e.what());
    }
    std::vector<std::size_t> lengths;
    lengths.reserve(read.size());
    for (const std::uint64_t value : read)
        // At least 2 tokens: a sequence needs one token to predict from and one to predict.
        lengths.push_back(std::max<std::size_t>(
            2, static_cast<std::size_t>(std::llround(static_cast<double>(value) * scale))));
    return lengths;
}

std::uint64_t mix(std::uint64_t x) noexcept { // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31U);
}

/// Item i: lengths[i] random token ids (the same ones every time it is drawn). With a `map`,
/// item i is item map[i] of the length file.
class token_dataset : public torch::data::datasets::Dataset<token_dataset, torch::Tensor> {
public:
    token_dataset(const std::vector<std::size_t>* lengths, std::size_t vocab, std::uint64_t seed,
                  std::shared_ptr<const std::vector<std::size_t>> map = nullptr)
        : m_lengths(lengths), m_vocab(vocab), m_seed(seed), m_map(std::move(map)) {}

    torch::Tensor get(std::size_t item) override {
        const std::size_t index = m_map ? (*m_map)[item] : item;
        const std::size_t length = (*m_lengths)[index];
        torch::Tensor tokens = torch::empty({static_cast<std::int64_t>(length)}, torch::kInt64);
        auto* out = tokens.data_ptr<std::int64_t>();
        std::uint64_t state = mix(m_seed ^ mix(index));
        for (std::size_t t = 0; t < length; ++t) {
            state = mix(state);
            out[t] = static_cast<std::int64_t>(state % m_vocab);
        }
        return tokens;
    }
    [[nodiscard]] torch::optional<std::size_t> size() const override {
        return m_map ? m_map->size() : m_lengths->size();
    }

private:
    const std::vector<std::size_t>* m_lengths;
    std::size_t m_vocab;
    std::uint64_t m_seed;
    std::shared_ptr<const std::vector<std::size_t>> m_map;
};

// ---------------------------------------------------------------------------------------------
// The model: a decoder-only transformer, one sequence at a time (no padding).
// ---------------------------------------------------------------------------------------------

struct block_impl : torch::nn::Module {
    block_impl(std::int64_t d_model, std::int64_t heads)
        : m_heads(heads),
          ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})))),
          ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})))),
          qkv(register_module("qkv", torch::nn::Linear(d_model, 3 * d_model))),
          proj(register_module("proj", torch::nn::Linear(d_model, d_model))),
          fc1(register_module("fc1", torch::nn::Linear(d_model, 4 * d_model))),
          fc2(register_module("fc2", torch::nn::Linear(4 * d_model, d_model))) {}

    // x: [L, d]. Causal self-attention written out: scores of every position against the
    // earlier ones, per head, then a GELU MLP; pre-norm residual blocks.
    torch::Tensor forward(torch::Tensor x) {
        const std::int64_t length = x.size(0);
        const std::int64_t d = x.size(1);
        const std::int64_t head_dim = d / m_heads;
        const torch::Tensor h =
            qkv(ln1(x)).view({length, 3, m_heads, head_dim}).permute({1, 2, 0, 3});
        const torch::Tensor q = h[0];
        const torch::Tensor k = h[1];
        const torch::Tensor v = h[2];
        torch::Tensor scores =
            torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
        const torch::Tensor future =
            torch::ones({length, length}, torch::TensorOptions().dtype(torch::kBool)).triu(1);
        scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
        const torch::Tensor attended =
            torch::matmul(torch::softmax(scores, -1), v).permute({1, 0, 2}).reshape({length, d});
        x = x + proj(attended);
        return x + fc2(torch::gelu(fc1(ln2(x))));
    }

    std::int64_t m_heads;
    torch::nn::LayerNorm ln1, ln2;
    torch::nn::Linear qkv, proj, fc1, fc2;
};
TORCH_MODULE_IMPL(block, block_impl);

struct decoder_impl : torch::nn::Module {
    decoder_impl(const settings& s, std::int64_t max_length)
        : tokens(register_module("tokens",
                                 torch::nn::Embedding(static_cast<std::int64_t>(s.vocab),
                                                      static_cast<std::int64_t>(s.d_model)))),
          positions(register_module(
              "positions", torch::nn::Embedding(max_length, static_cast<std::int64_t>(s.d_model)))),
          blocks(register_module("blocks", torch::nn::ModuleList())),
          norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions(
                                           {static_cast<std::int64_t>(s.d_model)})))),
          head(register_module("head", torch::nn::Linear(static_cast<std::int64_t>(s.d_model),
                                                         static_cast<std::int64_t>(s.vocab)))) {
        for (std::size_t l = 0; l < s.layers; ++l)
            blocks->push_back(
                block(static_cast<std::int64_t>(s.d_model), static_cast<std::int64_t>(s.heads)));
    }

    // Next-token loss of one sequence (summed over its positions).
    torch::Tensor loss(const torch::Tensor& sequence) {
        const std::int64_t length = sequence.size(0);
        torch::Tensor x = tokens(sequence) + positions(torch::arange(length, torch::kInt64));
        for (const auto& b : *blocks) x = b->as<block>()->forward(x);
        const torch::Tensor logits = head(norm(x));
        return torch::nn::functional::cross_entropy(
            logits.slice(0, 0, length - 1), sequence.slice(0, 1, length),
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    }

    torch::nn::Embedding tokens, positions;
    torch::nn::ModuleList blocks;
    torch::nn::LayerNorm norm;
    torch::nn::Linear head;
};
TORCH_MODULE_IMPL(decoder, decoder_impl);

/// Averages the gradients of `params` over the ranks: one flat buffer, one MPI_Allreduce.
class gradient_allreduce {
public:
    explicit gradient_allreduce(const std::vector<torch::Tensor>& params) : m_params(params) {
        std::int64_t total = 0;
        for (const torch::Tensor& p : m_params) total += p.numel();
        m_flat = torch::zeros({total}, torch::kFloat32);
    }

    void run(int ranks) {
        std::int64_t offset = 0;
        for (const torch::Tensor& p : m_params) {
            m_flat.slice(0, offset, offset + p.numel()).copy_(p.grad().reshape({-1}));
            offset += p.numel();
        }
        MPI_Allreduce(MPI_IN_PLACE, m_flat.data_ptr<float>(), static_cast<int>(m_flat.numel()),
                      MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        m_flat.div_(static_cast<double>(ranks));
        offset = 0;
        for (const torch::Tensor& p : m_params) {
            p.mutable_grad().copy_(m_flat.slice(0, offset, offset + p.numel()).view_as(p));
            offset += p.numel();
        }
    }

private:
    std::vector<torch::Tensor> m_params;
    torch::Tensor m_flat;
};

// ---------------------------------------------------------------------------------------------
// Batches: a loader per policy, its sampler timed.
// ---------------------------------------------------------------------------------------------

/// Forwards to a sampler and adds the time its next() takes to a shared counter.
template <class Inner>
class timed_sampler final : public torch::data::samplers::Sampler<> {
public:
    timed_sampler(Inner inner, std::shared_ptr<double> seconds)
        : m_inner(std::move(inner)), m_seconds(std::move(seconds)) {}
    void reset(torch::optional<std::size_t> new_size = torch::nullopt) override {
        m_inner.reset(new_size);
    }
    torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override {
        const clock_type::time_point start = clock_type::now();
        torch::optional<std::vector<std::size_t>> batch = m_inner.next(batch_size);
        *m_seconds += seconds_since(start);
        return batch;
    }
    void save(torch::serialize::OutputArchive& archive) const override { m_inner.save(archive); }
    void load(torch::serialize::InputArchive& archive) override { m_inner.load(archive); }

private:
    Inner m_inner;
    std::shared_ptr<double> m_seconds;
};

/// One policy's stream of batches on this rank (type-erased over the sampler).
class batch_stream {
public:
    virtual ~batch_stream() = default;
    /// The next batch of sequences; a new epoch starts when one ends.
    virtual std::vector<torch::Tensor> next() = 0;
    /// Seconds this stream's sampler has spent in next() so far.
    [[nodiscard]] double sampler_seconds() const { return *m_seconds; }

protected:
    std::shared_ptr<double> m_seconds = std::make_shared<double>(0.0);
};

template <class Sampler>
class loader_stream final : public batch_stream {
public:
    loader_stream(token_dataset dataset, Sampler sampler, std::size_t batch)
        : m_loader(torch::data::make_data_loader(
              std::move(dataset), timed_sampler<Sampler>(std::move(sampler), m_seconds),
              torch::data::DataLoaderOptions().batch_size(batch).workers(0))) {}

    std::vector<torch::Tensor> next() override {
        if (!m_it || *m_it == m_loader->end()) m_it.emplace(m_loader->begin());
        std::vector<torch::Tensor> batch = std::move(**m_it);
        ++*m_it;
        return batch;
    }

private:
    using loader_type = torch::data::StatelessDataLoader<token_dataset, timed_sampler<Sampler>>;
    std::unique_ptr<loader_type> m_loader;
    std::optional<torch::data::Iterator<std::vector<torch::Tensor>>> m_it;
};

/// The token count of a dataset index: the projection of the balancer's cost estimate.
struct length_of {
    const std::vector<std::size_t>* lengths;
    std::size_t operator()(std::size_t index) const { return (*lengths)[index]; }
};
using cost_type = bcl::affine_quadratic_cost<length_of>;

/// Throws unless every rank planned the epoch of `sampler` alike: one all-reduce of the digest's
/// min and max. A copy plans it (sharing the cost table), so that `sampler` still plans its epoch
/// in its first next(), where the sampler's time is measured.
void check_plans_agree(const bcl::torch::distributed_balanced_sampler& sampler) {
    bcl::torch::distributed_balanced_sampler probe = sampler;
    const std::uint64_t digest = probe.digest();
    std::array<std::uint64_t, 2> range{digest, ~digest}; // max of both: the min and the max
    MPI_Allreduce(MPI_IN_PLACE, range.data(), 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (range[0] != digest || ~range[1] != digest)
        throw std::runtime_error("the ranks' global plans differ (plan digests disagree): their "
                                 "batches would train records twice or never");
}

std::unique_ptr<batch_stream> make_stream(const std::string& policy, const settings& s,
                                          const std::vector<std::size_t>& lengths, int rank,
                                          int ranks) {
    const token_dataset dataset(&lengths, s.vocab, s.seed);
    index_sampler inner(lengths.size(), static_cast<std::size_t>(ranks),
                        static_cast<std::size_t>(rank));
    inner.set_epoch(static_cast<std::size_t>(s.seed)); // the same epoch order in every repeat
    inner.reset();
    if (policy == "none")
        return std::make_unique<loader_stream<index_sampler>>(dataset, std::move(inner), s.batch);
    if (policy == "global") {
        // With --global-order shared, the sampler plans the records `none` trains on, window by
        // window: the dataset's item p is the length file's map[p], where each window of R*K*B
        // items holds the K*B records each rank's DistributedRandomSampler hands out in those K
        // steps, and the sampler's own shuffle is off. Every policy then trains on the same
        // records in the same windows of K steps (as tumbling's), and the comparison measures
        // the balancing alone. With --global-order own, it plans its own shuffle of the whole
        // file, as a trainer would run it: other records than the other policies' in the
        // measured steps, whose mean cost differs by chance.
        const bool shared = s.global_order == "shared";
        const auto r_count = static_cast<std::size_t>(ranks);
        auto map = std::make_shared<std::vector<std::size_t>>();
        if (shared) {
            std::vector<std::vector<std::size_t>> shares(r_count);
            for (std::size_t r = 0; r < r_count; ++r) {
                index_sampler share(lengths.size(), r_count, r);
                share.set_epoch(static_cast<std::size_t>(s.seed));
                share.reset();
                while (auto more = share.next(4096))
                    shares[r].insert(shares[r].end(), more->begin(), more->end());
            }
            const std::size_t per_window = s.lookahead * s.batch;
            for (std::size_t first = 0; first < shares[0].size(); first += per_window)
                for (const std::vector<std::size_t>& mine : shares)
                    map->insert(map->end(), mine.begin() + std::ptrdiff_t(first),
                                mine.begin() +
                                    std::ptrdiff_t(std::min(first + per_window, mine.size())));
        } else {
            map->resize(lengths.size());
            std::iota(map->begin(), map->end(), std::size_t{0});
        }
        // The cost table, every rank's whole: the same L + c*L^2 as the balancer's estimate.
        std::vector<double> costs(map->size());
        for (std::size_t i = 0; i < map->size(); ++i) {
            const auto l = static_cast<double>(lengths[(*map)[i]]);
            costs[i] = l + s.cost_c * l * l;
        }
        bcl::torch::distributed_balanced_sampler sampler(
            std::move(costs), s.batch, r_count, static_cast<std::size_t>(rank),
            /*shuffle=*/!shared, s.seed, /*drop_last=*/false, s.lookahead);
        sampler.set_epoch(static_cast<std::size_t>(s.seed)); // the same epoch in every repeat
        sampler.reset();
        check_plans_agree(sampler);
        return std::make_unique<loader_stream<bcl::torch::distributed_balanced_sampler>>(
            token_dataset(&lengths, s.vocab, s.seed, std::move(map)), std::move(sampler), s.batch);
    }
    // bcl's estimate of an index's cost: L + c*L^2 of its token count (the a*n term is the same
    // for every batch of B sequences).
    const cost_type cost = bcl::affine_quadratic(0.0, 1.0, s.cost_c, length_of{&lengths});
    const bcl::options opt{.batch_size = s.batch,
                           .lookahead = s.lookahead,
                           .seed = s.seed,
                           .policy = bcl::named<bcl::lookahead_policy>(policy)};
    using sampler_type = bcl::torch::balanced_sampler<cost_type, index_sampler>;
    return std::make_unique<loader_stream<sampler_type>>(
        dataset, sampler_type(std::move(inner), cost, opt), s.batch);
}

// ---------------------------------------------------------------------------------------------
// The run.
// ---------------------------------------------------------------------------------------------

/// What one rank records of one measured batch.
struct batch_record {
    double policy = 0; // index into settings::policies
    double repeat = 0;
    double step = 0;
    double n = 0;
    double sum_l = 0;
    double sum_l2 = 0;
    double compute = 0; // forward + backward + optimizer, wall-clock seconds
    double cpu = 0;     // the same, CPU seconds of the rank's thread
    static constexpr std::size_t fields = 8;
};

struct trainer {
    trainer(const settings& s, std::int64_t max_length, int ranks)
        : model(s, max_length), optimizer(model->parameters(), torch::optim::AdamOptions(1e-3)),
          allreduce(model->parameters()), m_ranks(ranks) {}

    struct timing {
        double wall = 0;
        double cpu = 0;
    };

    // One step on `batch`; returns the compute time (not the all-reduce, which `reduce` = false
    // leaves out).
    timing step(const std::vector<torch::Tensor>& batch, bool reduce = true) {
        const clock_type::time_point start = clock_type::now();
        const double cpu_start = thread_cpu_seconds();
        optimizer.zero_grad();
        torch::Tensor loss = torch::zeros({}, torch::kFloat32);
        std::int64_t predicted = 0;
        for (const torch::Tensor& sequence : batch) {
            loss = loss + model->loss(sequence);
            predicted += sequence.size(0) - 1;
        }
        (loss / static_cast<double>(std::max<std::int64_t>(predicted, 1))).backward();
        timing t{seconds_since(start), thread_cpu_seconds() - cpu_start};
        if (reduce) allreduce.run(m_ranks);
        const clock_type::time_point update = clock_type::now();
        const double cpu_update = thread_cpu_seconds();
        optimizer.step();
        t.wall += seconds_since(update);
        t.cpu += thread_cpu_seconds() - cpu_update;
        return t;
    }

    decoder model;
    torch::optim::Adam optimizer;
    gradient_allreduce allreduce;
    int m_ranks;
};

/// A measured cost and its features: n sequences of sum L tokens and sum L^2 squared tokens.
struct cost_sample {
    double n = 0, sum_l = 0, sum_l2 = 0;
    double seconds = 0;
};

struct fit_result {
    double a = 0, b = 0, c = 0;
    double r2 = 0;        // of the samples fitted: each batch's least time over the repeats
    double r2_single = 0; // of every single measurement (each repeat apart)
    std::size_t batches = 0;
    [[nodiscard]] double operator()(double n, double sum_l, double sum_l2) const {
        return a * n + b * sum_l + c * sum_l2;
    }
    [[nodiscard]] double r2_of(const std::vector<cost_sample>& samples) const {
        double mean = 0.0;
        for (const cost_sample& x : samples) mean += x.seconds;
        mean /= static_cast<double>(samples.size());
        double ss_res = 0.0;
        double ss_tot = 0.0;
        for (const cost_sample& x : samples) {
            const double e = x.seconds - (*this)(x.n, x.sum_l, x.sum_l2);
            ss_res += e * e;
            ss_tot += (x.seconds - mean) * (x.seconds - mean);
        }
        return ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : 0.0;
    }
};

// Least squares of seconds ~ a*n + b*sum L + c*sum L^2: normal equations on columns scaled to
// unit RMS (their magnitudes differ by 10^4), solved by Gaussian elimination with pivoting.
fit_result fit_cost_model(const std::vector<cost_sample>& samples) {
    std::array<double, 3> scale{};
    for (const cost_sample& x : samples) {
        scale[0] += x.n * x.n;
        scale[1] += x.sum_l * x.sum_l;
        scale[2] += x.sum_l2 * x.sum_l2;
    }
    for (double& v : scale) v = v > 0.0 ? std::sqrt(v / static_cast<double>(samples.size())) : 1.0;
    std::array<std::array<double, 4>, 3> m{};
    for (const cost_sample& x : samples) {
        const std::array<double, 3> f{x.n / scale[0], x.sum_l / scale[1], x.sum_l2 / scale[2]};
        for (std::size_t i = 0; i < 3; ++i) {
            for (std::size_t j = 0; j < 3; ++j) m[i][j] += f[i] * f[j];
            m[i][3] += f[i] * x.seconds;
        }
    }
    for (std::size_t col = 0; col < 3; ++col) {
        std::size_t pivot = col;
        for (std::size_t row = col + 1; row < 3; ++row)
            if (std::abs(m[row][col]) > std::abs(m[pivot][col])) pivot = row;
        std::swap(m[col], m[pivot]);
        if (std::abs(m[col][col]) < 1e-300)
            throw std::runtime_error("the cost model fit is singular (too few distinct batches)");
        for (std::size_t row = 0; row < 3; ++row) {
            if (row == col) continue;
            const double f = m[row][col] / m[col][col];
            for (std::size_t k = col; k < 4; ++k) m[row][k] -= f * m[col][k];
        }
    }
    fit_result fit;
    fit.a = m[0][3] / m[0][0] / scale[0];
    fit.b = m[1][3] / m[1][1] / scale[1];
    fit.c = m[2][3] / m[2][2] / scale[2];
    fit.batches = samples.size();
    fit.r2 = fit.r2_of(samples);
    return fit;
}

// Fits the compute time (`seconds` of each record) of every batch, the least of its repeats:
// every repeat trains on the same batches, and other jobs on a shared machine only ever add
// time (cache and memory contention reach even the thread's CPU time), so the least of a
// batch's repeats is the measurement nearest its own cost. `gathered` holds `per_rank` records
// of rank 0, then those of rank 1, and so on.
fit_result fit_batches(const std::vector<batch_record>& gathered, double batch_record::*seconds,
                       std::size_t per_rank, std::size_t policies, std::size_t steps) {
    std::vector<cost_sample> least_of_repeats;
    std::vector<cost_sample> single;
    single.reserve(gathered.size());
    for (std::size_t first = 0; first < gathered.size(); first += per_rank) {
        std::vector<std::optional<cost_sample>> batch(policies * steps);
        for (std::size_t i = first; i < std::min(gathered.size(), first + per_rank); ++i) {
            const batch_record& r = gathered[i];
            single.push_back({r.n, r.sum_l, r.sum_l2, r.*seconds});
            std::optional<cost_sample>& least = batch[static_cast<std::size_t>(r.policy) * steps +
                                                      static_cast<std::size_t>(r.step)];
            if (!least || r.*seconds < least->seconds) least = single.back();
        }
        for (const std::optional<cost_sample>& x : batch)
            if (x) least_of_repeats.push_back(*x);
    }
    fit_result fit = fit_cost_model(least_of_repeats);
    fit.r2_single = fit.r2_of(single);
    return fit;
}

// One line per measured batch; `per_rank` records of rank 0 first, then rank 1's, ...
void write_records(const settings& s, const std::vector<batch_record>& gathered,
                   std::size_t per_rank) {
    std::ofstream out(s.records);
    if (!out) throw bad_input(s.records + ": cannot write the file");
    out << "policy,repeat,step,rank,n,sum_l,sum_l2,compute_wall,compute_cpu\n";
    for (std::size_t i = 0; i < gathered.size(); ++i) {
        const batch_record& r = gathered[i];
        out << fmt::format("{},{},{},{},{},{},{},{:.6f},{:.6f}\n",
                           s.policies[static_cast<std::size_t>(r.policy)], r.repeat, r.step,
                           i / per_rank, r.n, r.sum_l, r.sum_l2, r.compute, r.cpu);
    }
}

struct policy_report {
    std::string policy;
    std::vector<double> step_seconds_per_repeat; // wall clock per step, slowest rank
    double step_seconds = 0;                     // mean over steps and repeats
    double step_seconds_least = 0; // mean over steps of each step's least time over the repeats
    double spread = 0;             // (max - min) / mean of step_seconds_per_repeat
    double measured_speedup = 0;
    double measured_speedup_least = 0; // from step_seconds_least
    double predicted_step_seconds = 0;
    double predicted_speedup = 0;
    double predicted_efficiency = 0; // fitted: mean rank's step cost over the slowest rank's
    double predicted_rank_cost = 0;  // fitted: mean cost of a (step, rank)
    double relative_work = 0;        // predicted_rank_cost over none's: the work trained
    double sampler_seconds_share = 0;
    double compute_seconds = 0; // mean per (step, rank)
};

struct run_result {
    fit_result fit; // the one the prediction uses (settings::fit_clock)
    fit_result fit_wall;
    fit_result fit_cpu;
    std::vector<policy_report> policies;
    double mean_length = 0;
    std::size_t max_length = 0;
    int ranks = 0;
};

run_result run(const settings& s, const std::vector<std::size_t>& lengths, int rank, int ranks) {
    const std::size_t max_length = *std::max_element(lengths.begin(), lengths.end());
    torch::manual_seed(s.seed);
    trainer t(s, static_cast<std::int64_t>(max_length), ranks);
    const std::size_t policies = s.policies.size();

    // Warm-up steps on batches of the first policy, not measured.
    {
        auto warm = make_stream(s.policies[0], s, lengths, rank, ranks);
        for (std::size_t k = 0; k < s.warmup; ++k) (void)t.step(warm->next());
    }

    std::vector<batch_record> records;
    records.reserve(policies * s.repeats * s.steps);
    // Wall seconds of each (policy, repeat, block) on this rank, and sampler seconds.
    const std::size_t blocks = (s.steps + s.block - 1) / s.block;
    std::vector<double> block_seconds(policies * s.repeats * blocks, 0.0);
    std::vector<double> sampler_seconds(policies * s.repeats, 0.0);
    // Wall seconds of each (policy, repeat, step) on this rank: the batch, the compute and the
    // all-reduce that ends the step (where every rank waits for the slowest).
    std::vector<double> step_seconds(policies * s.repeats * s.steps, 0.0);
    for (std::size_t repeat = 0; repeat < s.repeats; ++repeat) {
        // Fresh streams: every repeat trains on the same batches, so repeats differ by noise.
        std::vector<std::unique_ptr<batch_stream>> streams;
        for (const std::string& p : s.policies)
            streams.push_back(make_stream(p, s, lengths, rank, ranks));
        for (std::size_t blk = 0; blk < blocks; ++blk) {
            for (std::size_t turn = 0; turn < policies; ++turn) {
                // Rotate who goes first, so no policy always follows the same one.
                const std::size_t p = (turn + blk + repeat) % policies;
                MPI_Barrier(MPI_COMM_WORLD);
                const clock_type::time_point start = clock_type::now();
                for (std::size_t k = blk * s.block; k < std::min(s.steps, (blk + 1) * s.block);
                     ++k) {
                    const clock_type::time_point step_start = clock_type::now();
                    const std::vector<torch::Tensor> batch = streams[p]->next();
                    batch_record r{static_cast<double>(p), static_cast<double>(repeat),
                                   static_cast<double>(k)};
                    for (const torch::Tensor& sequence : batch) {
                        const auto l = static_cast<double>(sequence.size(0));
                        r.n += 1;
                        r.sum_l += l;
                        r.sum_l2 += l * l;
                    }
                    const trainer::timing took = t.step(batch);
                    r.compute = took.wall;
                    r.cpu = took.cpu;
                    records.push_back(r);
                    step_seconds[(p * s.repeats + repeat) * s.steps + k] =
                        seconds_since(step_start);
                }
                block_seconds[(p * s.repeats + repeat) * blocks + blk] = seconds_since(start);
            }
        }
        for (std::size_t p = 0; p < policies; ++p)
            sampler_seconds[p * s.repeats + repeat] = streams[p]->sampler_seconds();
    }

    // Every rank: the slowest rank's time of each block; sampler time of the slowest rank.
    MPI_Allreduce(MPI_IN_PLACE, block_seconds.data(), static_cast<int>(block_seconds.size()),
                  MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, step_seconds.data(), static_cast<int>(step_seconds.size()),
                  MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    // Rank 0 gathers every rank's records (all ranks ran the same steps).
    std::vector<double> mine;
    mine.reserve(records.size() * batch_record::fields);
    for (const batch_record& r : records)
        mine.insert(mine.end(),
                    {r.policy, r.repeat, r.step, r.n, r.sum_l, r.sum_l2, r.compute, r.cpu});
    std::vector<double> all(rank == 0 ? mine.size() * static_cast<std::size_t>(ranks) : 0);
    MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
               static_cast<int>(mine.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    std::vector<double> sampler_share(policies * s.repeats, 0.0);
    for (std::size_t i = 0; i < sampler_share.size(); ++i) {
        double total = 0.0;
        for (std::size_t blk = 0; blk < blocks; ++blk) total += block_seconds[i * blocks + blk];
        sampler_share[i] = total > 0.0 ? sampler_seconds[i] / total : 0.0;
    }
    MPI_Allreduce(MPI_IN_PLACE, sampler_share.data(), static_cast<int>(sampler_share.size()),
                  MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    run_result result;
    result.ranks = ranks;
    result.max_length = max_length;
    result.mean_length =
        static_cast<double>(std::accumulate(lengths.begin(), lengths.end(), std::size_t{0})) /
        static_cast<double>(lengths.size());
    if (rank != 0) return result;

    std::vector<batch_record> gathered(all.size() / batch_record::fields);
    for (std::size_t i = 0; i < gathered.size(); ++i) {
        const double* f = all.data() + i * batch_record::fields;
        gathered[i] = {f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]};
    }
    if (!s.records.empty()) write_records(s, gathered, records.size());
    result.fit_wall =
        fit_batches(gathered, &batch_record::compute, records.size(), policies, s.steps);
    result.fit_cpu = fit_batches(gathered, &batch_record::cpu, records.size(), policies, s.steps);
    result.fit = s.fit_clock == "cpu" ? result.fit_cpu : result.fit_wall;

    // Predicted: per step, the slowest rank's fitted cost (repeat 0's batches; every repeat has
    // the same ones), through bcl-sim's metrics.
    const auto r_count = static_cast<std::size_t>(ranks);
    for (std::size_t p = 0; p < policies; ++p) {
        policy_report rep;
        rep.policy = s.policies[p];
        for (std::size_t repeat = 0; repeat < s.repeats; ++repeat) {
            double total = 0.0;
            for (std::size_t blk = 0; blk < blocks; ++blk)
                total += block_seconds[(p * s.repeats + repeat) * blocks + blk];
            rep.step_seconds_per_repeat.push_back(total / static_cast<double>(s.steps));
            rep.sampler_seconds_share =
                std::max(rep.sampler_seconds_share, sampler_share[p * s.repeats + repeat]);
        }
        const auto [lo, hi] = std::minmax_element(rep.step_seconds_per_repeat.begin(),
                                                  rep.step_seconds_per_repeat.end());
        rep.step_seconds = bcl_sim::mean_of(rep.step_seconds_per_repeat);
        rep.spread = (*hi - *lo) / rep.step_seconds;
        // Each step trains on the same batch in every repeat and other jobs only add time: its
        // least time over the repeats is another estimate, less hit by load but noisier.
        double least_sum = 0.0;
        for (std::size_t k = 0; k < s.steps; ++k) {
            double least = step_seconds[p * s.repeats * s.steps + k];
            for (std::size_t repeat = 1; repeat < s.repeats; ++repeat)
                least = std::min(least, step_seconds[(p * s.repeats + repeat) * s.steps + k]);
            least_sum += least;
        }
        rep.step_seconds_least = least_sum / static_cast<double>(s.steps);
        std::vector<double> fitted(s.steps * r_count, 0.0); // step-major, as bcl-sim keeps them
        double compute = 0.0;
        std::size_t computed = 0;
        for (const batch_record& r : gathered) {
            if (static_cast<std::size_t>(r.policy) != p) continue;
            compute += r.compute;
            ++computed;
        }
        for (std::size_t rk = 0; rk < r_count; ++rk)
            for (std::size_t i = 0; i < records.size(); ++i) {
                const batch_record& r = gathered[rk * records.size() + i];
                if (static_cast<std::size_t>(r.policy) != p || r.repeat != 0) continue;
                fitted[static_cast<std::size_t>(r.step) * r_count + rk] =
                    result.fit(r.n, r.sum_l, r.sum_l2);
            }
        rep.compute_seconds = computed > 0 ? compute / static_cast<double>(computed) : 0.0;
        const bcl_sim::step_metrics m = bcl_sim::compute_metrics(fitted, r_count);
        rep.predicted_step_seconds = m.mean_step_time;
        rep.predicted_efficiency = m.efficiency;
        rep.predicted_rank_cost = m.mean_rank_cost;
        result.policies.push_back(std::move(rep));
    }
    const auto none = std::find_if(result.policies.begin(), result.policies.end(),
                                   [](const policy_report& r) { return r.policy == "none"; });
    for (policy_report& rep : result.policies) {
        rep.measured_speedup = none->step_seconds / rep.step_seconds;
        rep.measured_speedup_least = none->step_seconds_least / rep.step_seconds_least;
        rep.predicted_speedup = none->predicted_step_seconds / rep.predicted_step_seconds;
        rep.relative_work = rep.predicted_rank_cost / none->predicted_rank_cost;
    }
    return result;
}

// ---------------------------------------------------------------------------------------------
// Output.
// ---------------------------------------------------------------------------------------------

void print_table(const settings& s, const run_result& r) {
    fmt::print("bcl-torch-train: {} ranks, B={}, K={}, {} steps x {} repeats per policy "
               "(blocks of {}, interleaved), lengths x{} (mean {:.0f}, max {} tokens), "
               "cost c={:.3g}{}\n",
               r.ranks, s.batch, s.lookahead, s.steps, s.repeats, s.block, s.length_scale,
               r.mean_length, r.max_length, s.cost_c,
               std::find(s.policies.begin(), s.policies.end(), "global") == s.policies.end()
                   ? std::string()
                   : ", global order " + s.global_order);
    fmt::print("model: decoder-only transformer, {} layers, d_model {}, {} heads, vocab {}, "
               "Adam, one sequence at a time (no padding)\n",
               s.layers, s.d_model, s.heads, s.vocab);
    for (const auto& [f, clock] : {std::pair{r.fit_cpu, "cpu"}, std::pair{r.fit_wall, "wall"}})
        fmt::print("fit of {} time over {} batches (least of the repeats): t = {:.3g}*n + "
                   "{:.3g}*sum L + {:.3g}*sum L^2 s (c/b = 1/{:.0f}), R^2 = {:.4f} "
                   "(each repeat apart: {:.4f}){}\n",
                   clock, f.batches, f.a, f.b, f.c, f.b / f.c, f.r2, f.r2_single,
                   clock == s.fit_clock ? ", predicts" : "");
    fmt::print("\n");
    fmt::print("{:<9} {:>8} {:>8} {:>{}} {:>7} {:>8} {:>8} {:>9} {:>7} {:>6} {:>6} {:>8}\n",
               "policy", "compute", "step s", "per repeat", 7 * s.repeats, "spread", "least sp",
               "measured", "predicted", "diff", "eff", "work", "sampler");
    for (const policy_report& p : r.policies) {
        std::string repeats;
        for (const double x : p.step_seconds_per_repeat)
            repeats += fmt::format("{}{:.4f}", repeats.empty() ? "" : " ", x);
        fmt::print("{:<9} {:>8.4f} {:>8.4f} {:>{}} {:>6.1f}% {:>8.3f} {:>8.3f} {:>9.3f} {:>6.1f}% "
                   "{:>6.3f} {:>6.3f} {:>7.3f}%\n",
                   p.policy, p.compute_seconds, p.step_seconds, repeats, 7 * s.repeats,
                   100.0 * p.spread, p.measured_speedup_least, p.measured_speedup,
                   p.predicted_speedup, 100.0 * (p.measured_speedup / p.predicted_speedup - 1.0),
                   p.predicted_efficiency, p.relative_work, 100.0 * p.sampler_seconds_share);
    }
    fmt::print("\ncompute: mean seconds per (step, rank); step s: wall clock per step (slowest "
               "rank), mean over the steps and repeats; per repeat: the mean step of each repeat "
               "(the repeats train on the same batches), and spread: their (max - min) / mean, "
               "the noise of this machine; least sp: speedup against none from each step's least "
               "time over the repeats; measured / predicted: speedup against none from step s / "
               "from the fitted model; diff: measured / predicted - 1; eff: the fitted model's "
               "mean rank's step cost over the slowest rank's; work: the fitted cost trained in "
               "the measured steps, against none's (a sliding buffer ends the steps holding "
               "records none has trained); sampler: share of the "
               "step spent in the sampler's next()\n");
}

nlohmann::json fit_json(const fit_result& f, const std::string& clock) {
    return {{"a", f.a},
            {"b", f.b},
            {"c", f.c},
            {"r2", f.r2},
            {"r2_single", f.r2_single},
            {"batches", f.batches},
            {"clock", clock}};
}

void print_json(const settings& s, const run_result& r) {
    nlohmann::json policies = nlohmann::json::array();
    for (const policy_report& p : r.policies)
        policies.push_back({{"policy", p.policy},
                            {"step_seconds", p.step_seconds},
                            {"step_seconds_least", p.step_seconds_least},
                            {"step_seconds_per_repeat", p.step_seconds_per_repeat},
                            {"spread", p.spread},
                            {"compute_seconds", p.compute_seconds},
                            {"measured_speedup", p.measured_speedup},
                            {"measured_speedup_least", p.measured_speedup_least},
                            {"predicted_step_seconds", p.predicted_step_seconds},
                            {"predicted_speedup", p.predicted_speedup},
                            {"predicted_efficiency", p.predicted_efficiency},
                            {"relative_work", p.relative_work},
                            {"sampler_seconds_share", p.sampler_seconds_share}});
    const nlohmann::json out = {{"config",
                                 {{"ranks", r.ranks},
                                  {"batch", s.batch},
                                  {"lookahead", s.lookahead},
                                  {"steps", s.steps},
                                  {"repeats", s.repeats},
                                  {"block", s.block},
                                  {"seed", s.seed},
                                  {"global_order", s.global_order},
                                  {"length_scale", s.length_scale},
                                  {"mean_length", r.mean_length},
                                  {"max_length", r.max_length},
                                  {"cost_c", s.cost_c},
                                  {"lengths", s.lengths},
                                  {"layers", s.layers},
                                  {"d_model", s.d_model},
                                  {"heads", s.heads},
                                  {"vocab", s.vocab}}},
                                {"fit", fit_json(r.fit, s.fit_clock)},
                                {"fit_wall", fit_json(r.fit_wall, "wall")},
                                {"fit_cpu", fit_json(r.fit_cpu, "cpu")},
                                {"policies", policies}};
    fmt::print("{}\n", out.dump(2));
}

// --calibrate: steps of B sequences of one length each, over a grid of lengths up to the
// longest, timed like a training step (forward, backward, Adam; every rank at once, as in
// training, but without the all-reduce). The fit of these isolates c/b: within real batches sum L
// and sum L^2 move together, so their fit pins the sum of the two terms better than the ratio.
void calibrate(const settings& s, const std::vector<std::size_t>& lengths, int rank, int ranks) {
    constexpr std::size_t points = 12;
    constexpr std::size_t repeats = 3;
    const std::size_t longest = *std::max_element(lengths.begin(), lengths.end());
    torch::manual_seed(s.seed);
    trainer t(s, static_cast<std::int64_t>(longest), ranks);
    token_dataset data(&lengths, s.vocab, s.seed);
    const auto index_of_length = [&](std::size_t want) {
        // The dataset item whose length is nearest `want`: real tokens of a real length.
        std::size_t best = 0;
        for (std::size_t i = 1; i < lengths.size(); ++i)
            if (std::abs(static_cast<double>(lengths[i]) - static_cast<double>(want)) <
                std::abs(static_cast<double>(lengths[best]) - static_cast<double>(want)))
                best = i;
        return best;
    };
    std::vector<cost_sample> samples;
    std::vector<double> median_cpu;
    std::vector<double> median_wall;
    (void)t.step(std::vector<torch::Tensor>(s.batch, data.get(index_of_length(longest / 2))),
                 false);
    for (std::size_t k = 1; k <= points; ++k) {
        const std::size_t index = index_of_length(std::max<std::size_t>(2, longest * k / points));
        const std::vector<torch::Tensor> batch(s.batch, data.get(index));
        std::vector<double> cpu;
        std::vector<double> wall;
        for (std::size_t r = 0; r < repeats; ++r) {
            const trainer::timing took = t.step(batch, false);
            cpu.push_back(took.cpu);
            wall.push_back(took.wall);
        }
        std::sort(cpu.begin(), cpu.end());
        std::sort(wall.begin(), wall.end());
        const auto l = static_cast<double>(lengths[index]);
        const auto b = static_cast<double>(s.batch);
        const double seconds = s.fit_clock == "cpu" ? cpu[repeats / 2] : wall[repeats / 2];
        samples.push_back({b, b * l, b * l * l, seconds});
        median_cpu.push_back(cpu[repeats / 2]);
        median_wall.push_back(wall[repeats / 2]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) return;
    const fit_result fit = fit_cost_model(samples);
    if (s.format == "json") {
        nlohmann::json points_json = nlohmann::json::array();
        for (std::size_t k = 0; k < samples.size(); ++k)
            points_json.push_back({{"length", samples[k].sum_l / samples[k].n},
                                   {"cpu_seconds", median_cpu[k]},
                                   {"wall_seconds", median_wall[k]}});
        fmt::print("{}\n", nlohmann::json{{"points", points_json},
                                          {"fit", fit_json(fit, s.fit_clock)},
                                          {"cost_c", fit.c / fit.b}}
                               .dump(2));
        return;
    }
    fmt::print("calibration: {} ranks at once, steps of B={} sequences of one length, median of "
               "{}\n{:>8} {:>10} {:>10}\n",
               ranks, s.batch, repeats, "length", "cpu s", "wall s");
    for (std::size_t k = 0; k < samples.size(); ++k)
        fmt::print("{:>8.0f} {:>10.4f} {:>10.4f}\n", samples[k].sum_l / samples[k].n, median_cpu[k],
                   median_wall[k]);
    fmt::print("fit of {} time: t = {:.3g}*n + {:.3g}*sum L + {:.3g}*sum L^2 s, R^2 = {:.4f}; "
               "c/b = {:.3g} = 1/{:.0f} (--cost-c)\n",
               s.fit_clock, fit.a, fit.b, fit.c, fit.r2, fit.c / fit.b, fit.b / fit.c);
}

int main_on_rank(int argc, char** argv, int rank, int ranks) {
    settings s;
    CLI::App app{"bcl-torch-train: real training over MPI ranks, batches balanced by "
                 "bcl::torch::balanced_sampler (tumbling, sliding) or planned by "
                 "bcl::torch::distributed_balanced_sampler (global); measured against the fitted "
                 "cost model"};
    app.add_option("--policy", s.policies, "Policies to run (none is always run: the reference)")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--steps", s.steps, "Measured steps per policy in each repeat")
        ->capture_default_str();
    app.add_option("--repeats", s.repeats,
                   "Passes over the same batches (their spread is the noise)")
        ->capture_default_str();
    app.add_option("--block", s.block, "Steps a policy runs before the next takes its turn")
        ->capture_default_str();
    app.add_option("--warmup", s.warmup, "Unmeasured steps first")->capture_default_str();
    app.add_option("--batch", s.batch, "B: sequences per batch")->capture_default_str();
    app.add_option("--lookahead", s.lookahead, "K: batches per window")->capture_default_str();
    app.add_option("--seed", s.seed, "Seed of the model, the tokens and the epoch order")
        ->capture_default_str();
    app.add_option("--length-scale", s.length_scale, "Factor applied to every length")
        ->capture_default_str();
    app.add_option("--cost-c", s.cost_c, "c of the balancer's cost estimate L + c*L^2")
        ->capture_default_str();
    app.add_option("--lengths", s.lengths, "Length file, one token count per line")
        ->capture_default_str();
    app.add_option("--format", s.format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    app.add_option("--fit-clock", s.fit_clock,
                   "Compute time the cost model is fitted to: cpu (the thread's CPU time) or wall")
        ->check(CLI::IsMember({"cpu", "wall"}))
        ->capture_default_str();
    app.add_option("--global-order", s.global_order,
                   "The records the global policy plans: shared (those none trains on, in the "
                   "same windows of K steps, its own shuffle off) or own (its own shuffle of the "
                   "whole file)")
        ->check(CLI::IsMember({"shared", "own"}))
        ->capture_default_str();
    app.add_flag("--calibrate", s.calibrate,
                 "Instead of training: time steps of B sequences of one length, over 12 lengths "
                 "up to the longest, and fit the cost model (c/b is what --cost-c wants)");
    app.add_option("--records", s.records,
                   "Write every measured batch (policy, repeat, step, rank, n, sum L, sum L^2, "
                   "wall and CPU compute seconds) to this CSV file");
    app.add_option("--layers", s.layers, "Transformer layers")->capture_default_str();
    app.add_option("--d-model", s.d_model, "Model width")->capture_default_str();
    app.add_option("--heads", s.heads, "Attention heads")->capture_default_str();
    app.add_option("--vocab", s.vocab, "Vocabulary size")->capture_default_str();
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (rank == 0) app.exit(e);
        return e.get_exit_code() == 0 ? 0 : 2;
    }
    if (std::find(s.policies.begin(), s.policies.end(), "none") == s.policies.end())
        s.policies.insert(s.policies.begin(), "none");
    check_settings(s);
    const std::vector<std::size_t> lengths = read_lengths(s.lengths, s.length_scale);
    if (s.calibrate) {
        calibrate(s, lengths, rank, ranks);
        return 0;
    }
    const run_result result = run(s, lengths, rank, ranks);
    if (rank == 0) {
        if (s.format == "json")
            print_json(s, result);
        else
            print_table(s, result);
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    int ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    // One core per rank: the ranks are the parallelism.
    at::set_num_interop_threads(1);
    torch::set_num_threads(1);
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
    int code = 0;
    try {
        code = main_on_rank(argc, argv, rank, ranks);
    } catch (const bad_input& e) {
        if (rank == 0) std::fprintf(stderr, "bcl-torch-train: %s\n", e.what());
        code = 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bcl-torch-train: rank %d: %s\n", rank, e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return code;
}
