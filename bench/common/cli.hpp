#pragma once
// What bcl-sim and bcl-mpi-bench share on the command line: the flags both take, a check for
// whole-number flags, the comma list of --policy, how bad input ends a run (exit code 2 and one
// line on stderr), and the progress line shown while a run takes its time.

#include "input.hpp"

#include <bcl/error.hpp>
#include <bcl/names.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <utility>
#include <vector>

namespace bcl_cli {

// ---------------------------------------------------------------------------------------------
// Flags.
// ---------------------------------------------------------------------------------------------

/// Largest --steps: both tools keep a number or two per step for the whole run.
inline constexpr std::uint64_t max_steps = std::uint64_t{1} << 26;

/// A CLI11 check for a flag that takes a whole number from 0 to `max` (a count, a seed). CLI11
/// reads unsigned flags with strtoull, which wraps "-5" to 2^64 - 5, stops at "2.5" with a bare
/// "could not convert", and reads "010" as octal 8. This check names what is wrong with the value
/// (negative, not whole, too large, not a number) and hands CLI11 the number in plain decimal, so
/// "1e3" is 1000 and "010" is 10.
[[nodiscard]] inline CLI::Validator whole_number(std::uint64_t max) {
    const auto check = [max](std::string& input) -> std::string {
        const std::string_view text = bcl_sim::detail::trim(input);
        const std::string expected = fmt::format("it takes a whole number from 0 to {}", max);
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc{} || ptr != end) {
            // Not plain digits: a sign, a fraction, an exponent, too many digits, or no number.
            const std::optional<double> x = bcl_sim::detail::parse_number(text);
            if (!x) return fmt::format("'{}' is not a number; {}", text, expected);
            if (*x < 0.0) return fmt::format("{} is negative; {}", text, expected);
            if (*x != std::floor(*x))
                return fmt::format("{} is not a whole number; {}", text, expected);
            if (*x >= 0x1p64) return fmt::format("{} is too large; {}", text, expected);
            value = static_cast<std::uint64_t>(*x);
        }
        if (value > max) return fmt::format("{} is too large; {}", text, expected);
        input = std::to_string(value);
        return {};
    };
    return CLI::Validator(check, fmt::format("0..{}", max));
}

/// Adds `flag`, a whole number from 0 to `max` (see whole_number()), showing its default.
template <class Unsigned>
CLI::Option* add_count(CLI::App& app, const std::string& flag, Unsigned& value,
                       const std::string& description, std::uint64_t max) {
    // transform, not check: CLI11 runs a check on a copy of the text, so its rewrite would be lost.
    return app.add_option(flag, value, description)
        ->transform(whole_number(max))
        ->capture_default_str();
}

/// --dist and --cost: the record lengths and what a record of length L costs.
inline void add_workload_flags(CLI::App& app, std::string& dist, std::string& cost) {
    app.add_option("--dist", dist,
                   "record lengths: lognormal:mu=6,sigma=1 | pareto:xm=100,alpha=1.5 | "
                   "bimodal:short=512,long=4096,p=0.25,sigma=0.3 | uniform:lo=1,hi=4096 | "
                   "file:PATH (one token count per line, a whole number up to 2^31; the file "
                   "is sharded over the ranks)")
        ->capture_default_str();
    app.add_option("--cost", cost,
                   "cost of a record of length L: affine:a=..,b=..,c=.. is a + b*L + c*L^2 "
                   "(default L + L^2/24576, a 7B-model FLOPs proxy)")
        ->capture_default_str();
}

/// --batch and --lookahead: B and K, as bcl::options takes them (at least 1 each; the tools
/// check that, and bcl::validate() their product).
inline void add_batch_flags(CLI::App& app, std::size_t& batch, std::size_t& lookahead) {
    add_count(app, "--batch", batch, "B, records per rank per step", bcl::max_window_records);
    add_count(app, "--lookahead", lookahead, "K, batches per bcl window", bcl::max_window_records);
}

/// --seed: every random choice of a run follows from it.
inline void add_seed_flag(CLI::App& app, std::uint64_t& seed) {
    add_count(app, "--seed", seed, "seed of every random choice",
              std::numeric_limits<std::uint64_t>::max());
}

/// Adds `flag`, which takes one of `choices`, showing its default.
inline CLI::Option* add_choice(CLI::App& app, const std::string& flag, std::string& value,
                               const std::string& description, std::vector<std::string> choices) {
    return app.add_option(flag, value, description)
        ->check(CLI::IsMember(std::move(choices)))
        ->capture_default_str();
}

/// The names of an options enum's values, as the library's registry gives them (bcl/names.hpp):
/// the choices of a flag that sets one.
template <class Enum>
[[nodiscard]] std::vector<std::string> choices_of() {
    const auto names = bcl::names_of<Enum>();
    return {names.begin(), names.end()};
}

/// --format, one of `formats`.
inline void add_format_flag(CLI::App& app, std::string& format, std::vector<std::string> formats) {
    add_choice(app, "--format", format, "output format", std::move(formats));
}

/// --progress: auto, on or off (see progress). `auto` cannot see a terminal behind mpirun, which
/// hands every rank a pipe for stderr: `on` is for that.
inline void add_progress_flag(CLI::App& app, std::string& mode) {
    add_choice(app, "--progress", mode,
               "a progress line on stderr, updated in place: auto (when stderr is a terminal), on "
               "(e.g. under mpirun, whose ranks never see one), off",
               {"auto", "on", "off"});
}

/// The names in a comma list such as --policy none,sliding, blanks trimmed. An empty name is
/// bad input (input_error naming `flag`).
[[nodiscard]] inline std::vector<std::string> split_names(std::string_view text,
                                                          std::string_view flag) {
    std::vector<std::string> names;
    std::string_view rest = text;
    for (;;) {
        const std::size_t comma = rest.find(',');
        const std::string_view name = bcl_sim::detail::trim(rest.substr(0, comma));
        if (name.empty())
            throw bcl_sim::input_error(fmt::format("{} {}: empty name in the list", flag, text));
        names.emplace_back(name);
        if (comma == std::string_view::npos) return names;
        rest.remove_prefix(comma + 1);
    }
}

// ---------------------------------------------------------------------------------------------
// How a run ends: exit code 0 success, 2 bad input, 1 anything else.
// ---------------------------------------------------------------------------------------------

inline constexpr int exit_bad_input = 2;
inline constexpr int exit_failure = 1;

/// What the command line asks for. Ordered so that the maximum over several processes is what
/// all of them must do (bcl-mpi-bench): bad input beats a help request, which beats a run.
enum class request : int { run = 0, help = 1, bad_input = 2 };

/// The command line read: what it asks for, with the help text or the one-line error.
struct parsed {
    request what = request::run;
    std::string message;
};

/// Parses the command line. Never throws and prints nothing: the caller says where the text goes.
[[nodiscard]] inline parsed parse(CLI::App& app, int argc, char** argv, std::string_view program) {
    try {
        app.parse(argc, argv);
        return {};
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
            return {request::help, app.help()};
        return {request::bad_input,
                fmt::format("{} (run '{} --help' for the flags)", e.what(), program)};
    }
}

/// Why a run stopped, and the exit code that says so.
struct failure {
    int exit_code = exit_failure;
    std::string message; ///< one line
};

/// Calls `body()`. Returns nothing if it returns; otherwise what it threw as a failure: exit code
/// 2 for bad input (bcl_sim::input_error, or a bcl::error: input the library refuses, such as a
/// record that no batch under --memory-budget can hold), 1 for anything else.
template <class Body>
[[nodiscard]] std::optional<failure> catch_failure(Body&& body) {
    try {
        std::forward<Body>(body)();
        return std::nullopt;
    } catch (const bcl_sim::input_error& e) {
        return failure{exit_bad_input, e.what()};
    } catch (const bcl::error& e) {
        return failure{exit_bad_input, e.what()};
    } catch (const std::exception& e) {
        return failure{exit_failure, fmt::format("internal error: {}", e.what())};
    }
}

/// Prints `f` as "program: error: message" on stderr and returns its exit code.
[[nodiscard]] inline int report(std::string_view program, const failure& f) {
    fmt::print(stderr, "{}: error: {}\n", program, f.message);
    return f.exit_code;
}

// ---------------------------------------------------------------------------------------------
// The progress line.
// ---------------------------------------------------------------------------------------------

/// Whether stderr is a terminal.
[[nodiscard]] inline bool stderr_is_terminal() noexcept {
    return isatty(fileno(stderr)) != 0;
}

/// A one-line counter on stderr, redrawn in place ("policy sliding (6/6): step 1200/2000") at
/// most four times a second and erased at the end. Off, it prints nothing at all, so output that
/// goes to a file or a pipe is the same as without it.
class progress {
public:
    /// `mode` as --progress takes it: "on", "off", or "auto" (on when stderr is a terminal).
    explicit progress(std::string_view mode)
        : m_enabled(mode == "on" || (mode == "auto" && stderr_is_terminal())) {}
    progress(const progress&) = delete;
    progress& operator=(const progress&) = delete;
    ~progress() { clear(); }

    [[nodiscard]] bool enabled() const noexcept { return m_enabled; }

    /// Starts a task and shows it at once: `label`, then ": step done/total" as step() reports
    /// (no counter for total = 0).
    void begin(std::string label, std::size_t total = 0) {
        if (!m_enabled) return;
        m_label = std::move(label);
        m_total = total;
        m_done = 0;
        draw();
    }

    /// `done` steps of the task are complete. Cheap enough to call for every record: it looks at
    /// the clock only when `done` grows.
    void step(std::size_t done) {
        if (!m_enabled || done <= m_done) return;
        m_done = done;
        if (clock::now() - m_drawn >= interval) draw();
    }

    /// Erases the line (and the cursor goes back to its start).
    void clear() {
        if (!m_enabled || m_width == 0) return;
        fmt::print(stderr, "\r{:{}}\r", "", m_width);
        std::fflush(stderr);
        m_width = 0;
    }

private:
    using clock = std::chrono::steady_clock;
    static constexpr std::chrono::milliseconds interval{250};

    void draw() {
        std::string text =
            m_total > 0 ? fmt::format("{}: step {}/{}", m_label, m_done, m_total) : m_label;
        const std::size_t width = text.size();
        if (width < m_width)
            text.append(m_width - width, ' '); // blank out the rest of a longer line
        fmt::print(stderr, "\r{}", text);
        std::fflush(stderr);
        m_width = width;
        m_drawn = clock::now();
    }

    bool m_enabled = false;
    std::string m_label;
    std::size_t m_total = 0;
    std::size_t m_done = 0;
    std::size_t m_width = 0; ///< of the line on screen, 0 if none
    clock::time_point m_drawn{};
};

} // namespace bcl_cli
