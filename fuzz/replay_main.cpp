// A main() for the fuzz targets without libFuzzer: runs each file named on the command line
// (or every file in each directory named, in name order) through LLVMFuzzerTestOneInput once.
// It reproduces a finding with any compiler, e.g. GCC with -DBCL_SANITIZE=ON, and keeps the
// harnesses compiling under the developer warnings there. With --describe first, each harness
// also prints what it read from each input (its options, ...), so a seed can be checked to ask
// for what its name says.
//
//   bcl-fuzz-<target>-replay [--describe] FILE_OR_DIR...

#include "fuzz_support.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void run_file(const std::filesystem::path& path) {
    std::ifstream file(path, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(file),
                                  std::istreambuf_iterator<char>()};
    std::printf("running %s (%zu bytes)\n", path.c_str(), bytes.size());
    std::fflush(stdout);
    (void)LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
    int first = 1;
    if (argc > 1 && std::strcmp(argv[1], "--describe") == 0) {
        bcl_fuzz::describe_inputs = true;
        first = 2;
    }
    std::size_t runs = 0;
    for (int i = first; i < argc; ++i) {
        const std::filesystem::path path(argv[i]);
        if (std::filesystem::is_directory(path)) {
            std::vector<std::filesystem::path> files;
            for (const auto& entry : std::filesystem::directory_iterator(path))
                if (entry.is_regular_file()) files.push_back(entry.path());
            std::sort(files.begin(), files.end());
            for (const auto& file : files) run_file(file);
            runs += files.size();
        } else {
            run_file(path);
            ++runs;
        }
    }
    std::printf("%zu inputs ran without a finding\n", runs);
    return 0;
}
