#pragma once
// A cost table read in place: a one-dimensional (or, for stage costs, (N, D)) C-contiguous numpy
// array of any integer or floating dtype (a memory map from np.load(path, mmap_mode="r") included),
// held by reference, each entry read as a double when a window needs it. Checked once, in one
// streaming pass that also takes its digest, so that a table of 1e9 records costs no copy of
// itself.

#include <bcl/cost_check.hpp>
#include <bcl/detail/random.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/error.hpp>
#include <bcl/stage_plan.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace bcl_python {

namespace py = pybind11;

class table_view {
public:
    /// Holds `values` (its owner stays alive while this does). bcl::error, naming `what`, for an
    /// array that is not one-dimensional and C-contiguous, or of a dtype other than a signed or
    /// unsigned integer of 1-8 bytes, float32 or float64; then checks every entry
    /// (bcl::valid_cost, naming the first bad one's dataset index and value) and takes the
    /// digest bcl::cost_table_digest takes of the same values as doubles. O(N), no copy.
    /// With `integers_only` (a table of counts, such as tokens), a floating dtype is refused too.
    table_view(py::array values, std::string what, bool integers_only = false)
        : table_view(std::move(values), std::move(what), integers_only,
                     [](std::size_t, auto) noexcept {}) {}

    /// The same, and `check(i, value)` called on each entry (in its own type) in the same pass,
    /// once it is a valid cost: what it throws propagates. A table of 1e9 entries is read once.
    template <class Check>
    table_view(py::array values, std::string what, bool integers_only, Check&& check)
        : m_values(std::move(values)), m_what(std::move(what)) {
        // A table of stage costs is (N, D): D costs a record, row after row.
        const bool rows = m_values.ndim() == 2 && !integers_only;
        if (m_values.ndim() != 1 && !rows)
            throw bcl::error(m_what + " must be one-dimensional (got " +
                             std::to_string(m_values.ndim()) + " dimensions)");
        if (rows) {
            m_stages = static_cast<std::size_t>(m_values.shape(1));
            bcl::check_stage_shape(m_stages, m_stages, m_what);
        }
        if (!(m_values.flags() & py::array::c_style))
            throw bcl::error(m_what + " must be C-contiguous to be read in place");
        const char kind = m_values.dtype().kind();
        const auto width = static_cast<std::size_t>(m_values.dtype().itemsize());
        const bool integer =
            (kind == 'i' || kind == 'u') && (width == 1 || width == 2 || width == 4 || width == 8);
        const bool floating = kind == 'f' && (width == 4 || width == 8);
        if (integers_only && !integer)
            throw bcl::error(m_what + " must hold integers to be read in place (got dtype " +
                             std::string(py::str(m_values.dtype())) + ")");
        if (!integer && !floating)
            throw bcl::error(m_what +
                             " must hold integers or float32/float64 to be read in place "
                             "(got dtype " +
                             std::string(py::str(m_values.dtype())) + ")");
        const auto entries = static_cast<std::size_t>(m_values.size());
        m_size = entries / m_stages;
        m_digest = read([&](const auto* data) {
            bcl::cost_table_digester digester(entries);
            py::gil_scoped_release unlocked;
            for (std::size_t i = 0; i < entries; ++i) {
                const auto c = static_cast<double>(data[i]);
                if (!bcl::valid_cost(c)) [[unlikely]] {
                    py::gil_scoped_acquire locked;
                    bcl::throw_invalid_cost(m_what + "[" + entry_name(i) + "] is ", c);
                }
                check(i, data[i]);
                digester.add(c);
            }
            return digester.digest();
        });
        // A table of D > 1 stages digests its values row after row and then its D, so that it
        // never shares a digest with the same values as one cost a record.
        if (m_stages > 1) m_digest = bcl::detail::mix64(m_digest ^ m_stages);
    }

    /// The records: the table's rows.
    [[nodiscard]] std::size_t size() const noexcept { return m_size; }
    /// The costs a record: D of a table of stage costs, else 1.
    [[nodiscard]] std::size_t stages() const noexcept { return m_stages; }
    /// The digest of the table's values as doubles: bcl::cost_table_digest of their conversion.
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_digest; }

    /// Calls f(data) with the table's entries as a pointer to their own type, and returns what
    /// it returns: one dispatch a window, then plain reads.
    template <class F>
    auto read(F&& f) const -> std::invoke_result_t<F&, const double*> {
        const void* p = m_values.data();
        const auto width = m_values.dtype().itemsize();
        switch (m_values.dtype().kind()) {
        case 'f':
            if (width == 4) return f(static_cast<const float*>(p));
            return f(static_cast<const double*>(p));
        case 'i':
            if (width == 1) return f(static_cast<const std::int8_t*>(p));
            if (width == 2) return f(static_cast<const std::int16_t*>(p));
            if (width == 4) return f(static_cast<const std::int32_t*>(p));
            return f(static_cast<const std::int64_t*>(p));
        default:
            if (width == 1) return f(static_cast<const std::uint8_t*>(p));
            if (width == 2) return f(static_cast<const std::uint16_t*>(p));
            if (width == 4) return f(static_cast<const std::uint32_t*>(p));
            return f(static_cast<const std::uint64_t*>(p));
        }
    }

    /// Entry i (below size()) as a double: one dispatch an entry, for reads a window at a time.
    [[nodiscard]] double value(std::size_t i) const {
        return read([i](const auto* data) { return static_cast<double>(data[i]); });
    }
    /// Entry i (below size()) of a table of counts (built `integers_only`, every entry checked
    /// at least 0).
    [[nodiscard]] std::uint64_t count(std::size_t i) const {
        const void* p = m_values.data();
        const auto width = m_values.dtype().itemsize();
        if (m_values.dtype().kind() == 'i') {
            if (width == 1)
                return static_cast<std::uint64_t>(static_cast<const std::int8_t*>(p)[i]);
            if (width == 2)
                return static_cast<std::uint64_t>(static_cast<const std::int16_t*>(p)[i]);
            if (width == 4)
                return static_cast<std::uint64_t>(static_cast<const std::int32_t*>(p)[i]);
            return static_cast<std::uint64_t>(static_cast<const std::int64_t*>(p)[i]);
        }
        if (width == 1) return static_cast<const std::uint8_t*>(p)[i];
        if (width == 2) return static_cast<const std::uint16_t*>(p)[i];
        if (width == 4) return static_cast<const std::uint32_t*>(p)[i];
        return static_cast<const std::uint64_t*>(p)[i];
    }

private:
    // Entry i of the values, as the user indexes it: "i", or "record, stage" of a stage table.
    [[nodiscard]] std::string entry_name(std::size_t i) const {
        if (m_stages == 1) return std::to_string(i);
        return std::to_string(i / m_stages) + ", " + std::to_string(i % m_stages);
    }

    py::array m_values;
    std::string m_what;
    std::size_t m_size = 0;
    std::size_t m_stages = 1;
    std::uint64_t m_digest = 0;
};

} // namespace bcl_python
