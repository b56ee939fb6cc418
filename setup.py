"""Builds libduet with CMake and puts it inside the duet package.

The library is built for every backend this machine has a compiler for
(CUDA through nvcc, HIP through hipcc, and the host), as CMake decides;
DUET_CMAKE_ARGS adds options (shell-quoted), e.g.
    DUET_CMAKE_ARGS="-DDUET_ENABLE_HIP=OFF -DDUET_CUDA_ARCHITECTURES=90" pip install --no-build-isolation .
DUET_PREBUILT_LIBRARY=build/libduet.so bundles a library already built
instead (CI reuses its CMake build that way).
The package version is CMake's project(VERSION), the one libduet reports.
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def cmake_project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(\s*duet\s+VERSION\s+([0-9][0-9.]*)", text)
    if match is None:
        raise RuntimeError("CMakeLists.txt: no project(duet VERSION x.y.z)")
    return match.group(1)


class CMakeLibrary(Extension):
    """libduet.so, built by CMake rather than from listed sources."""

    def __init__(self):
        super().__init__("duet.libduet", sources=[])


class BuildLibduet(build_ext):
    def build_extension(self, ext):
        library = os.environ.get("DUET_PREBUILT_LIBRARY") or self.build_with_cmake()
        package_dir = pathlib.Path(self.get_ext_fullpath(ext.name)).resolve().parent
        package_dir.mkdir(parents=True, exist_ok=True)
        # The real file under the name the binding loads (no SONAME links in a wheel).
        shutil.copyfile(os.path.realpath(library), package_dir / "libduet.so")

    def build_with_cmake(self):
        build_dir = pathlib.Path(self.build_temp).resolve() / "cmake"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), *generator, "-DCMAKE_BUILD_TYPE=Release",
                     "-DDUET_BUILD_TESTS=OFF", "-DDUET_BUILD_TOOLS=OFF",
                     *shlex.split(os.environ.get("DUET_CMAKE_ARGS", ""))]
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "duet", "-j", jobs], check=True)
        return build_dir / "libduet.so"

    def get_ext_filename(self, ext_name):
        return os.path.join(*ext_name.split(".")[:-1], "libduet.so")


BUILD_BASE = ".build-python"  # out of the way of CMake's own build/ folder
os.makedirs(os.path.join(ROOT, BUILD_BASE), exist_ok=True)

setup(
    version=cmake_project_version(),
    ext_modules=[CMakeLibrary()],
    cmdclass={"build_ext": BuildLibduet},
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
