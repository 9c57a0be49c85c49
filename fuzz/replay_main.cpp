// A main() for the fuzz targets without libFuzzer: runs each file named on the command line
// (or every file in each directory named) through LLVMFuzzerTestOneInput once. It reproduces a
// finding with any compiler, e.g. GCC with -DBCL_SANITIZE=ON, and keeps the harnesses compiling
// under the developer warnings there.

#include <cstddef>
#include <cstdint>
#include <cstdio>
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
}

} // namespace

int main(int argc, char** argv) {
    std::size_t runs = 0;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path path(argv[i]);
        if (std::filesystem::is_directory(path)) {
            for (const auto& entry : std::filesystem::directory_iterator(path))
                if (entry.is_regular_file()) {
                    run_file(entry.path());
                    ++runs;
                }
        } else {
            run_file(path);
            ++runs;
        }
    }
    std::printf("%zu inputs ran without a finding\n", runs);
    return 0;
}
