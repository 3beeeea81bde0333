"""Builds the qtk._C extension (the deploy runtime + its pybind11 binding) with CMake and ninja."""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


def drop_stale_cache(build_dir):
    """Starts the build directory anew where its cache names a cmake or ninja that is gone: pip
    builds wheels in isolated environments that it deletes afterwards, so a second `pip wheel .`
    would otherwise find the first one's tools in the cache."""
    cache = build_dir / "CMakeCache.txt"
    if not cache.exists():
        return
    text = cache.read_text()
    for key in ("CMAKE_COMMAND", "CMAKE_MAKE_PROGRAM"):
        found = re.search(rf"^{key}:[A-Z]+=(.*)$", text, re.M)
        if found is None or not Path(found.group(1)).exists():
            shutil.rmtree(build_dir)
            return


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        import pybind11

        output_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(self.build_temp).resolve() / "cmake"
        drop_stale_cache(build_dir)
        build_dir.mkdir(parents=True, exist_ok=True)
        config = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={output_dir}",
        ] + shlex.split(os.environ.get("CMAKE_ARGS", ""))  # e.g. -DQTK_CUDA=ON
        subprocess.run(config, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "qtk_C", "-j", jobs],
                       check=True)


setup(ext_modules=[CMakeExtension("qtk._C")], cmdclass={"build_ext": CMakeBuild})
