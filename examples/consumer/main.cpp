#include <bcl/bcl.hpp>

int main() {
    return BCL_VERSION_MAJOR >= 0 ? 0 : 1;
}
