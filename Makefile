# graphemb: one command for the main job and one for the tests.
#   modern stack : torch 2.13 (CPU wheel), PyG, no DGL -- the demo's stack
#   dgl stack    : torch 2.2.1 + DGL 2.1.0 + PyG + FBGEMM (the DGL adapters, the DGL and
#                  FBGEMM oracles)
# Environments are built on first use under .venv/ and rebuilt when their pins change.
# Dependencies live in pyproject.toml's extras; requirements/*-stack.txt only pin versions.

PYTHON ?= python3
# The Planetoid files (Cora, CiteSeer): a copy beside the checkout when there is one (machines
# without network); otherwise the loader's cache or the canonical download.
ifeq ($(GRAPHEMB_PLANETOID_DIR),)
ifneq ($(wildcard ../shared/datasets/planetoid/ind.cora.graph),)
export GRAPHEMB_PLANETOID_DIR := $(abspath ../shared/datasets/planetoid)
endif
endif
VENV   := .venv
PIP    := pip install --quiet --disable-pip-version-check
PYTEST_ARGS ?=

DGL_PY    := $(VENV)/dgl/bin/python
MODERN_PY := $(VENV)/modern/bin/python
# uv installs several times faster than pip (the demo's whole environment in ~15 s); it is
# pointed at the machine's local wheels (/opt/wheels: the torch 2.13 CPU wheel), when there.
LOCAL_WHEELS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)
UV_INSTALL = $(VENV)/$(1)/bin/uv pip install --quiet --python $(VENV)/$(1)/bin/python \
	$(LOCAL_WHEELS) -c requirements/$(1)-stack.txt -e
# Extras each stack's test environment installs beyond "dev".
EXTRAS_dgl    := ,dgl,fbgemm
EXTRAS_modern := ,bench,docs
# The environments depend on pyproject.toml's [project] table only (its dependencies and
# extras), not on tool settings: this file is rewritten only when that table changes.
PROJECT_DEPS := $(VENV)/project-deps.json
$(shell mkdir -p $(VENV) && $(PYTHON) -c "import json, tomllib; print(json.dumps(tomllib.load(open('pyproject.toml', 'rb'))['project'], sort_keys=True))" > $(PROJECT_DEPS).new && (cmp -s $(PROJECT_DEPS).new $(PROJECT_DEPS) || mv $(PROJECT_DEPS).new $(PROJECT_DEPS)); rm -f $(PROJECT_DEPS).new)

# Stamps of pattern rules are kept (make would delete them as intermediate files).
.PRECIOUS: $(VENV)/%/.base $(VENV)/%/.ready

# The compiled kernels: plain C++ without torch (csrc/), built by every install of the package
# into graphemb/ (the editable installs below build them in place, once for both stacks).
KERNELS := graphemb/_kernels.abi3.so
KERNEL_SOURCES := setup.py $(shell find csrc -name '*.cpp' -o -name '*.h')

.PHONY: demo test test-dgl test-modern test-fallback test-wheel test-gpu bench-gpu lint envs kernels bench bench-soak clean docs

## demo: train GraphSAGE with learnable node embeddings on Cora (modern stack, CPU); the
## checkpoint it saves resumes with `examples/node_classification.py --checkpoint runs/cora.ckpt --resume`
demo: $(VENV)/modern/.base $(KERNELS)
	$(MODERN_PY) examples/node_classification.py --checkpoint runs/cora.ckpt

## test: lint + types, then the whole suite on both stacks; fails if any part fails
## (no tests collected = failure)
test: envs
	@status=0; \
	echo "=== lint: ruff + mypy ==="; \
	$(MAKE) --no-print-directory lint || status=1; \
	echo "=== dgl stack: torch 2.2.1 + DGL 2.1.0 ==="; \
	$(MAKE) --no-print-directory test-dgl || status=1; \
	echo "=== modern stack: torch 2.13, no DGL ==="; \
	$(MAKE) --no-print-directory test-modern || status=1; \
	exit $$status

test-dgl: $(VENV)/dgl/.ready $(KERNELS)
	$(DGL_PY) -m pytest $(PYTEST_ARGS)

test-modern: $(VENV)/modern/.ready $(KERNELS)
	$(MODERN_PY) -m pytest $(PYTEST_ARGS)

## test-fallback: the library's tests (unit and multi-process) on the modern stack with the
## compiled kernels disabled, so that the pure-torch paths (what CUDA and a machine without a
## compiler run) stay tested; the end-to-end tests (benchmark scripts, docs, notebooks) run
## the compiled path that users of the README's commands get
test-fallback: $(VENV)/modern/.ready
	GRAPHEMB_DISABLE_KERNELS=1 $(MODERN_PY) -m pytest $(PYTEST_ARGS) tests/unit tests/multiprocess

## test-wheel: one wheel (python -m pip wheel), installed nowhere but unpacked beside the
## checkout, passes the kernel tests on both stacks (torch 2.13 and 2.2.1) without a rebuild
WHEEL_TESTS := test_native.py test_kernels.py test_sort_rows.py test_sampling_compiled.py \
	test_io_edge_list_parser.py test_dropout.py test_skipgram_compiled.py test_aggregate_kernels.py \
	test_skipgram_narrow_output.py test_walks.py test_walks_weighted.py test_gather_rows.py
test-wheel: $(VENV)/modern/.ready $(VENV)/dgl/.ready
	rm -rf .whl && $(MODERN_PY) -m pip wheel --quiet --disable-pip-version-check --no-deps -w .whl .
	cd .whl && unzip -q graphemb-*.whl -d site
	@for py in $(CURDIR)/$(MODERN_PY) $(CURDIR)/$(DGL_PY); do \
	  (cd .whl && GRAPHEMB_EXPECT_INSTALL=$(CURDIR)/.whl/site PYTHONPATH=$(CURDIR)/.whl/site \
	    $$py -m pytest -q -p no:cacheprovider --rootdir=$(CURDIR) \
	    $(addprefix $(CURDIR)/tests/unit/,$(WHEEL_TESTS))) || exit 1; \
	done

## test-gpu: on a CUDA machine with torch, PyG and pytest already installed (no venv, no
## network needed: graphemb is imported from this checkout): the CUDA tests, both examples
## on the GPU included. bench-gpu: the GPU parts of the sparse-step and end-to-end benchmarks.
test-gpu:
	PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -m cuda -p no:cacheprovider tests $(PYTEST_ARGS)

bench-gpu:
	cd benchmarks && PYTHONPATH=$(CURDIR) $(PYTHON) bench_partitioned.py --skip-cpu
	cd benchmarks && PYTHONPATH=$(CURDIR) $(PYTHON) bench_end_to_end.py --device cuda --no-dgl

lint: $(VENV)/modern/.ready
	$(VENV)/modern/bin/ruff check graphemb tests examples benchmarks
	$(VENV)/modern/bin/ruff format --check graphemb tests examples benchmarks
	$(VENV)/modern/bin/mypy graphemb

envs: $(VENV)/dgl/.ready $(VENV)/modern/.ready

# .base: the package (its compiled kernels included) with the examples' needs (what `make
# demo` uses); .ready adds the test tooling.
$(VENV)/%/.base: requirements/%-stack.txt $(PROJECT_DEPS)
	rm -rf $(VENV)/$*
	$(PYTHON) -m venv $(VENV)/$*
	$(VENV)/$*/bin/$(PIP) uv
	$(call UV_INSTALL,$*) ".[examples]"
	touch $@

# The environment's bytecode compiled once: uv writes no .pyc files, and where the
# environment sets PYTHONDONTWRITEBYTECODE neither does Python, so every process of the tests
# (hundreds start torch) compiled torch, PyG and DGL from source (import torch: 10 s against
# 6 s, loaded). A file that does not compile is only left to import from source.
SITE_PACKAGES = $$($(VENV)/$(1)/bin/python -c "import sysconfig; print(sysconfig.get_path('purelib'))")
$(VENV)/%/.ready: $(VENV)/%/.base
	$(call UV_INSTALL,$*) ".[dev$(EXTRAS_$*)]"
	$(VENV)/$*/bin/python -m compileall -q -j 0 $(call SITE_PACKAGES,$*) > /dev/null || true
	touch $@

# After an edit of csrc/: the kernels rebuilt in place (one library serves both stacks).
$(KERNELS): $(KERNEL_SOURCES) | $(VENV)/modern/.base
	$(MODERN_PY) setup.py --quiet build_ext --inplace
	@touch $@

kernels: $(KERNELS)

## bench: the sparse-step benchmark (dgl stack, so DGL is measured too), kernels rebuilt if
## their sources changed; bench-soak: 10,000 steps of 2-process training, memory sampled
bench: $(VENV)/dgl/.ready $(KERNELS)
	$(DGL_PY) benchmarks/bench_sparse_step.py

bench-soak: $(VENV)/modern/.ready $(KERNELS)
	$(MODERN_PY) benchmarks/bench_soak.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache build .whl $(KERNELS)

## docs: the documentation (guides + API reference from the docstrings) into build/docs/,
## warnings as errors; tests/end_to_end/test_docs_build.py runs the same build in `make test`
docs: $(VENV)/modern/.ready
	NO_MKDOCS_2_WARNING=1 $(VENV)/modern/bin/mkdocs build --strict
