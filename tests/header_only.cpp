// Compiles and links against nothing but bcl::bcl: the umbrella header must
// stand on its own, with no fmt, Catch2 or other third-party dependency.
#include <bcl/bcl.hpp>

int main() {
    return 0;
}
