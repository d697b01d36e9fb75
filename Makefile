# graphemb: two stacks, one command each for the main job and for the tests.
#   dgl stack    : torch 2.2.1 + DGL 2.1.0 (everything, DGL integration included)
#   modern stack : torch 2.13, no DGL (the core; DGL tests skip with a reason)
# Environments are built on first use under .venv/ and rebuilt when their pins change.

PYTHON ?= python3
VENV   := .venv
PIP    := pip install --quiet --disable-pip-version-check
PYTEST_ARGS ?=

DGL_PY    := $(VENV)/dgl/bin/python
MODERN_PY := $(VENV)/modern/bin/python

.PHONY: demo test test-dgl test-modern envs kernels bench clean

## demo: train GraphSAGE with learnable node embeddings on Cora (dgl stack); the checkpoint
## it saves resumes with `examples/node_classification.py --checkpoint runs/cora.ckpt --resume`
demo: $(VENV)/dgl/.ready $(VENV)/dgl/.kernels
	$(DGL_PY) examples/node_classification.py --checkpoint runs/cora.ckpt

## test: the whole suite on both stacks; fails if either fails (no tests collected = failure)
test: envs
	@status=0; \
	echo "=== dgl stack: torch 2.2.1 + DGL 2.1.0 ==="; \
	$(MAKE) --no-print-directory test-dgl || status=1; \
	echo "=== modern stack: torch 2.13, no DGL ==="; \
	$(MAKE) --no-print-directory test-modern || status=1; \
	exit $$status

test-dgl: $(VENV)/dgl/.ready $(VENV)/dgl/.kernels
	$(DGL_PY) -m pytest $(PYTEST_ARGS)

test-modern: $(VENV)/modern/.ready $(VENV)/modern/.kernels
	$(MODERN_PY) -m pytest $(PYTEST_ARGS)

envs: $(VENV)/dgl/.ready $(VENV)/modern/.ready

## bench: the CPU benchmarks of benchmarks/ (dgl stack, so DGL is measured too)
bench: $(VENV)/dgl/.ready
	$(DGL_PY) benchmarks/bench_sparse_step.py

$(VENV)/%/.ready: requirements/%-stack.txt requirements/dev.txt
	rm -rf $(VENV)/$*
	$(PYTHON) -m venv $(VENV)/$*
	$(VENV)/$*/bin/$(PIP) -r requirements/$*-stack.txt -r requirements/dev.txt
	$(VENV)/$*/bin/$(PIP) --no-deps -e .
	$(MAKE) --no-print-directory $(VENV)/$*/.kernels
	touch $@

# The optional fused CPU kernels, compiled against each stack's own torch. Built from a
# copy inside the environment so that the two stacks never share build files.
$(VENV)/%/.kernels: csrc/setup.py csrc/graphemb_kernels/sparse_rows.cpp
	rm -rf $(VENV)/$*/kernels-src && cp -r csrc $(VENV)/$*/kernels-src
	cd $(VENV)/$*/kernels-src && ../bin/$(PIP) --no-build-isolation --no-deps .
	$(VENV)/$*/bin/python -c "import torch, graphemb_kernels"
	touch $@

kernels: $(VENV)/dgl/.kernels $(VENV)/modern/.kernels

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
