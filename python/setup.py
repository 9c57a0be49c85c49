"""Builds bcl._core, the pybind11 extension over the header-only C++ library.

The headers are found, in this order, in $BCL_INCLUDE_DIR, in the repository's include/ next to
this directory (a source checkout: `pip install ./python`), or in include/ inside this directory
(an sdist, into which the sdist command below copies them). The search starts from this file's
own location, not the working directory, so it holds wherever pip runs the build.
"""

import os
import re
import shutil
from pathlib import Path

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent


def find_include():
    candidates = []
    if os.environ.get("BCL_INCLUDE_DIR"):
        candidates.append(Path(os.environ["BCL_INCLUDE_DIR"]))
    candidates += [HERE.parent / "include", HERE / "include"]
    for c in candidates:
        if (c / "bcl" / "bcl.hpp").is_file():
            return c
    raise RuntimeError(
        "bcl's C++ headers were not found; looked for bcl/bcl.hpp in "
        + ", ".join(str(c) for c in candidates)
        + ". Build from the repository (pip install ./python) or set BCL_INCLUDE_DIR."
    )


def library_version(include):
    text = (include / "bcl" / "version.hpp").read_text()
    match = re.search(r'#define BCL_VERSION_STRING "([^"]+)"', text)
    if not match:
        raise RuntimeError("BCL_VERSION_STRING not found in bcl/version.hpp")
    return match.group(1)


class sdist_with_headers(sdist):
    """An sdist that carries the headers, so it builds away from the repository."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        target = Path(base_dir) / "include" / "bcl"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(find_include() / "bcl", target)


INCLUDE = find_include()

ext = Pybind11Extension(
    "bcl._core",
    ["src/core.cpp"],
    include_dirs=[str(INCLUDE)],
    # The headers, so that an edited header rebuilds the extension (build/ is kept between runs).
    depends=sorted(str(p) for p in (INCLUDE / "bcl").rglob("*.hpp"))
    + sorted(str(p) for p in (HERE / "src").glob("*.hpp")),
    cxx_std=20,
    extra_compile_args=["-O2", "-g0"],
)

setup(
    version=library_version(INCLUDE),
    ext_modules=[ext],
    cmdclass={"build_ext": build_ext, "sdist": sdist_with_headers},
    zip_safe=False,
)
