#pragma once
// The cost (and optionally memory) of each dataset index, as the samplers of bcl._core look it
// up. Two layouts: dense, from arrays given up front (the whole table is checked when it is
// built, so every rank refuses a bad table before its first step), and sparse, grown from the
// answers of a Python callable for the indices an epoch draws (so an index of 2^40 costs one
// entry, not a table of 2^40).

#include <bcl/bcl.hpp>
#include <bcl/cost_check.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace bcl_python {

namespace py = pybind11;

// Both come from the Python side already checked (strict_indices, the cost arrays' dtypes), so a
// conversion here is only a layout change.
using index_array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using value_array = py::array_t<double, py::array::c_style | py::array::forcecast>;

/// Whether `value` is a cost or memory estimate the balancer accepts (bcl::valid_cost).
[[nodiscard]] inline bool acceptable(double value) noexcept {
    return bcl::valid_cost(value);
}

/// Throws bcl::error naming `subject` (e.g. "costs[7]") unless acceptable(value).
inline void check_estimate(const auto& subject, double value) {
    if (acceptable(value)) [[likely]]
        return;
    bcl::throw_invalid_cost(std::string(subject) + " is ", value);
}

class cost_table {
public:
    /// A dense table: entry i of `cost` (and `memory`) is the estimate of dataset index i. Every
    /// entry is checked here (bcl::error naming the first bad one, or a length mismatch).
    cost_table(const value_array& cost, const std::optional<value_array>& memory)
        : m_dense(true), m_has_memory(memory.has_value()) {
        copy_checked(cost, "costs", m_cost);
        if (memory) {
            copy_checked(*memory, "memory", m_memory);
            if (m_memory.size() != m_cost.size())
                throw bcl::error("memory has " + std::to_string(m_memory.size()) +
                                 " entries but costs has " + std::to_string(m_cost.size()) +
                                 "; give one memory estimate per dataset index");
        }
    }

    /// A sparse table, grown by assign(); `has_memory` says whether memory values come along.
    explicit cost_table(bool has_memory) : m_dense(false), m_has_memory(has_memory) {}

    [[nodiscard]] bool has_memory() const noexcept { return m_has_memory; }
    [[nodiscard]] bool dense() const noexcept { return m_dense; }
    /// Entries held: the dataset size of a dense table.
    [[nodiscard]] std::size_t size() const noexcept {
        return m_dense ? m_cost.size() : m_sparse.size();
    }
    /// A dense table's costs, by dataset index; bcl::error for a sparse table.
    [[nodiscard]] std::span<const double> dense_costs() const {
        if (!m_dense) throw bcl::error("costs given one index at a time make no whole table");
        return m_cost;
    }
    /// The dataset size, where the table knows it (a dense table).
    [[nodiscard]] std::optional<std::uint64_t> dataset_size() const noexcept {
        if (!m_dense) return std::nullopt;
        return m_cost.size();
    }

    /// The distinct indices among `indices` without an entry, in first-seen order (a sparse
    /// table; a dense one has none to add). Indices were checked non-negative when converted.
    [[nodiscard]] index_array missing(const index_array& indices) const {
        std::vector<std::int64_t> out;
        if (!m_dense) {
            std::unordered_set<std::int64_t> listed;
            for (const std::int64_t index : span_of(indices))
                if (!m_sparse.contains(index) && listed.insert(index).second) out.push_back(index);
        }
        index_array result(static_cast<py::ssize_t>(out.size()));
        std::copy(out.begin(), out.end(), result.mutable_data());
        return result;
    }

    /// Adds the entries of a sparse table, each checked (bcl::error naming the dataset index).
    /// All or nothing: whatever throws, MemoryError included, leaves the table as it was.
    void assign(const index_array& indices, const value_array& cost,
                const std::optional<value_array>& memory) {
        const auto n = static_cast<std::size_t>(indices.size());
        if (m_dense) throw bcl::error("a table of costs given up front takes no new entries");
        if (static_cast<std::size_t>(cost.size()) != n ||
            (memory && static_cast<std::size_t>(memory->size()) != n))
            throw bcl::error("as many costs (and memory values) as indices are needed");
        if (memory.has_value() != m_has_memory)
            throw bcl::error("memory values are needed exactly when the sampler has a memory "
                             "estimate");
        const std::int64_t* in = indices.data();
        for (std::size_t i = 0; i < n; ++i) {
            if (in[i] < 0)
                throw bcl::error("dataset index " + std::to_string(in[i]) + " is negative");
            if (!acceptable(cost.data()[i])) [[unlikely]]
                check_estimate("the cost of dataset index " + std::to_string(in[i]),
                               cost.data()[i]);
            if (memory && !acceptable(memory->data()[i])) [[unlikely]]
                check_estimate("the memory of dataset index " + std::to_string(in[i]),
                               memory->data()[i]);
        }
        std::size_t added = 0;
        try {
            m_sparse.reserve(m_sparse.size() + n);
            for (; added < n; ++added)
                m_sparse.try_emplace(in[added],
                                     entry{cost.data()[added], memory ? memory->data()[added] : 0});
        } catch (...) {
            // Undo this call's insertions: erase does not throw. Indices already present were
            // left untouched by try_emplace, and missing() lists each index once.
            for (std::size_t i = 0; i < added; ++i) m_sparse.erase(in[i]);
            throw;
        }
    }

    /// Cost of dataset index `index`; bcl::error if the table has none.
    [[nodiscard]] double cost(std::int64_t index) const {
        if (m_dense) return m_cost[dense_slot(index)];
        return sparse_entry(index).cost;
    }
    [[nodiscard]] double memory(std::int64_t index) const {
        if (m_dense) return m_memory[dense_slot(index)];
        return sparse_entry(index).memory;
    }

    /// The costs of `indices`, in order (bcl::error for an index without one).
    [[nodiscard]] std::vector<double> costs_of(std::span<const std::int64_t> indices) const {
        std::vector<double> out;
        out.reserve(indices.size());
        for (const std::int64_t index : indices) out.push_back(cost(index));
        return out;
    }

    static std::span<const std::int64_t> span_of(const index_array& a) {
        return {a.data(), static_cast<std::size_t>(a.size())};
    }

private:
    struct entry {
        double cost;
        double memory;
    };

    static void copy_checked(const value_array& values, std::string_view what,
                             std::vector<double>& to) {
        if (values.ndim() != 1)
            throw bcl::error(std::string(what) + " must be one-dimensional (got " +
                             std::to_string(values.ndim()) + " dimensions)");
        const double* v = values.data();
        const auto n = static_cast<std::size_t>(values.size());
        for (std::size_t i = 0; i < n; ++i)
            if (!acceptable(v[i])) [[unlikely]]
                check_estimate(std::string(what) + "[" + std::to_string(i) + "]", v[i]);
        to.assign(v, v + n);
    }

    [[nodiscard]] std::size_t dense_slot(std::int64_t index) const {
        const auto at = static_cast<std::size_t>(index);
        if (index >= 0 && at < m_cost.size()) [[likely]]
            return at;
        throw bcl::error("dataset index " + std::to_string(index) + " has no cost (costs has " +
                         std::to_string(m_cost.size()) + " entries)");
    }

    [[nodiscard]] const entry& sparse_entry(std::int64_t index) const {
        const auto it = m_sparse.find(index);
        if (it != m_sparse.end()) [[likely]]
            return it->second;
        throw bcl::error("dataset index " + std::to_string(index) + " has no cost");
    }

    bool m_dense;
    bool m_has_memory;
    std::vector<double> m_cost; // dense
    std::vector<double> m_memory;
    std::unordered_map<std::int64_t, entry> m_sparse;
};

} // namespace bcl_python
