"""Optional fused CPU kernels of graphemb's sparse optimizers (module ``graphemb_kernels``).

Built against the torch of the environment it is installed into, so build it without
isolation, once per environment::

    pip install --no-build-isolation ./csrc

graphemb works without it (pure-torch formulas, several times slower on CPU) and uses it
when it imports.
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="graphemb-kernels",
    version="0.1.0",
    description="Fused CPU kernels of graphemb: optimizer updates, CSC build, edge-list parsing, sampling, skip-gram, dropout",
    ext_modules=[
        CppExtension(
            "graphemb_kernels",
            [
                "graphemb_kernels/sparse_rows.cpp",
                "graphemb_kernels/csc.cpp",
                "graphemb_kernels/edge_list.cpp",
                "graphemb_kernels/sampler.cpp",
                "graphemb_kernels/dropout.cpp",
                "graphemb_kernels/aggregate.cpp",
                "graphemb_kernels/skipgram.cpp",
            ],
            # at::parallel_for runs on OpenMP; without errno, std::sqrt vectorizes (same values)
            extra_compile_args=["-O3", "-fopenmp", "-fno-math-errno"],
            extra_link_args=["-fopenmp"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
