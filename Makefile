# graphemb: one command for the main job and one for the tests.
#   modern stack : torch 2.13 (CPU wheel), PyG, no DGL -- the demo's stack
#   dgl stack    : torch 2.2.1 + DGL 2.1.0 + PyG (the DGL adapters and the DGL oracles)
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
EXTRAS_dgl    := ,dgl
EXTRAS_modern := ,bench
# The environments depend on pyproject.toml's [project] table only (its dependencies and
# extras), not on tool settings: this file is rewritten only when that table changes.
PROJECT_DEPS := $(VENV)/project-deps.json
$(shell mkdir -p $(VENV) && $(PYTHON) -c "import json, tomllib; print(json.dumps(tomllib.load(open('pyproject.toml', 'rb'))['project'], sort_keys=True))" > $(PROJECT_DEPS).new && (cmp -s $(PROJECT_DEPS).new $(PROJECT_DEPS) || mv $(PROJECT_DEPS).new $(PROJECT_DEPS)); rm -f $(PROJECT_DEPS).new)

# Stamps of pattern rules are kept (make would delete them as intermediate files).
.PRECIOUS: $(VENV)/%/.base $(VENV)/%/.ready $(VENV)/%/.kernels

.PHONY: demo test test-dgl test-modern test-gpu bench-gpu lint envs kernels bench bench-soak clean

## demo: train GraphSAGE with learnable node embeddings on Cora (modern stack, CPU); the
## checkpoint it saves resumes with `examples/node_classification.py --checkpoint runs/cora.ckpt --resume`
demo: $(VENV)/modern/.base
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

test-dgl: $(VENV)/dgl/.ready $(VENV)/dgl/.kernels
	$(DGL_PY) -m pytest $(PYTEST_ARGS)

test-modern: $(VENV)/modern/.ready $(VENV)/modern/.kernels
	$(MODERN_PY) -m pytest $(PYTEST_ARGS)

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

# .base: the package with the examples' needs (what `make demo` uses); .ready adds the
# test tooling and the optional C++ kernels.
$(VENV)/%/.base: requirements/%-stack.txt $(PROJECT_DEPS)
	rm -rf $(VENV)/$*
	$(PYTHON) -m venv $(VENV)/$*
	$(VENV)/$*/bin/$(PIP) uv
	$(call UV_INSTALL,$*) ".[examples]"
	touch $@

$(VENV)/%/.ready: $(VENV)/%/.base
	$(call UV_INSTALL,$*) ".[dev$(EXTRAS_$*)]"
	$(MAKE) --no-print-directory $(VENV)/$*/.kernels
	touch $@

# The optional fused CPU kernels, compiled against each stack's own torch. Built from a
# copy inside the environment so that the two stacks never share build files.
$(VENV)/%/.kernels: $(VENV)/%/.base csrc/setup.py $(wildcard csrc/graphemb_kernels/*.cpp csrc/graphemb_kernels/*.h csrc/graphemb_kernels/*.inc)
	rm -rf $(VENV)/$*/kernels-src && cp -r csrc $(VENV)/$*/kernels-src
	cd $(VENV)/$*/kernels-src && ../bin/$(PIP) --no-build-isolation --no-deps .
	$(VENV)/$*/bin/python -c "import torch, graphemb_kernels"
	touch $@

kernels: $(VENV)/dgl/.ready $(VENV)/modern/.ready $(VENV)/dgl/.kernels $(VENV)/modern/.kernels

## bench: the sparse-step benchmark (dgl stack, so DGL is measured too), kernels rebuilt if
## their sources changed; bench-soak: 10,000 steps of 2-process training, memory sampled
bench: $(VENV)/dgl/.ready $(VENV)/dgl/.kernels
	$(DGL_PY) benchmarks/bench_sparse_step.py

bench-soak: $(VENV)/modern/.ready $(VENV)/modern/.kernels
	$(MODERN_PY) benchmarks/bench_soak.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
