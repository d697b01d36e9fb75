"""The build of graphemb's compiled kernels (``csrc/``), part of every install.

The kernels are plain C++ behind a C interface (``csrc/graphemb_kernels.h``): no torch and no
Python headers, so one build serves every torch and every Python >= 3.10 (the wheel is
tagged abi3), and it compiles in seconds. The library lands in the package as
``graphemb/_kernels.abi3.so``, loaded with ctypes by :mod:`graphemb._native`. Where no C++
compiler is found the install goes on without it, and graphemb says so
(``python -m graphemb info``) and runs its pure-torch paths.
"""

import os
from concurrent.futures import ThreadPoolExecutor
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPILE_ARGS = [
    "-std=c++17",
    "-O3",
    "-fvisibility=hidden",  # only the ge_* functions of the C interface are exported
    "-fopenmp-simd",  # `#pragma omp simd` only: the kernels run on threads of their own
    "-fno-math-errno",  # std::sqrt vectorizes (same values)
    "-Wno-psabi",
    "-g0",  # no debug information: a third of the build time and most of the size
]


class BuildKernels(build_ext):
    """build_ext that compiles the sources of one library on every core (setuptools'
    ``--parallel`` runs whole extensions side by side, not the files of one), for a
    library that is no Python module."""

    def build_extensions(self) -> None:
        compiler = self.compiler
        serial_compile = compiler.compile

        def compile_in_parallel(
            sources,
            output_dir=None,
            macros=None,
            include_dirs=None,
            debug=0,
            extra_preargs=None,
            extra_postargs=None,
            depends=None,
        ):
            if not hasattr(compiler, "_setup_compile"):  # another compiler class: one by one
                return serial_compile(
                    sources,
                    output_dir,
                    macros,
                    include_dirs,
                    debug,
                    extra_preargs,
                    extra_postargs,
                    depends,
                )
            macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
                output_dir, macros, include_dirs, sources, depends, extra_postargs
            )
            cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

            def compile_one(obj: str) -> None:
                source, extension = build[obj]
                compiler._compile(obj, source, extension, cc_args, extra_postargs, pp_opts)

            # the largest sources first, so that no core waits on one started last
            largest_first = sorted(build, key=lambda obj: -os.path.getsize(build[obj][0]))
            with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                list(pool.map(compile_one, largest_first))
            return objects

        compiler.compile = compile_in_parallel
        super().build_extensions()

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return []  # no PyInit_ function: ctypes loads the library, import never does


setup(
    ext_modules=[
        Extension(
            "graphemb._kernels",
            sources=sorted(glob("csrc/**/*.cpp", recursive=True)),
            include_dirs=["csrc"],
            depends=sorted(glob("csrc/**/*.h", recursive=True)),
            language="c++",
            extra_compile_args=COMPILE_ARGS,
            extra_link_args=["-pthread"],
            libraries=["dl"],  # dlsym (common/parallel.cpp), in libc itself on newer glibc
            py_limited_api=True,
            optional=True,
        )
    ],
    cmdclass={"build_ext": BuildKernels},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
