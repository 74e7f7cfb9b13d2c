# The README's commands. Everything a fresh machine needs is installed here.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= dev,dashboard,tune,train,optuna,plots,lightning,deepspeed,transformers,hyperopt,bayesopt,nevergrad,bohb,pb2,zoopt,ax,mlflow,wandb,comet,aim,xgboost,lightgbm

.PHONY: install demo test lint slurm chromium tracers deepspeed-ops bench bench-check bench-ray clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

# The demo needs only these extras: a fresh machine installs them alone (the rest comes with
# `make install` / `make test`); where everything is installed already, that is used.
DEMO_EXTRAS ?= tune,train,plots
DEMO_STAMP := $(VENV)/.demo-stamp

$(DEMO_STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[$(DEMO_EXTRAS)]'
	touch $(DEMO_STAMP)

demo: $(if $(wildcard $(STAMP)),$(STAMP),$(DEMO_STAMP))
	$(PY) -m actorrt.examples.digits

lint: install
	$(VENV)/bin/ruff check actorrt tests benchmarks examples
	$(VENV)/bin/mypy

# tests/cluster/test_slurm.py runs the Slurm recipe against a real Slurm: as root, Debian's
# slurm-wlm and munge are installed when missing (nothing is done when they are there);
# where they cannot be, that test says why it skipped.
slurm:
	@command -v slurmctld >/dev/null && command -v munged >/dev/null || \
	    { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	        slurm-wlm munge >/dev/null; } || \
	    echo "slurm-wlm and munge are not installed: tests/cluster/test_slurm.py will skip"

# DeepSpeed compiles its CPU shared-memory op (deepspeed_shm_comm) with the machine's C++
# compiler the first time a process group starts, about a minute, and keeps it under
# ~/.cache/torch_extensions: built here once, so the tests that use DeepSpeed stay short.
deepspeed-ops: install
	DS_ACCELERATOR=cpu $(PY) -c "from deepspeed.accelerator import get_accelerator; \
	    get_accelerator().create_op_builder('ShareMemCommBuilder').load()" >/dev/null

# tests/dashboard/test_browser.py drives the dashboard in a real headless browser: as root,
# Debian's chromium and chromium-driver are installed when missing; where they cannot be,
# those tests say why they skipped.
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	    { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	        chromium chromium-driver >/dev/null; } || \
	    echo "chromium and chromium-driver are not installed: tests/dashboard/test_browser.py will skip"

# tests/processes/test_liveness_traced.py traces a worker with strace and holds one in gdb:
# as root, Debian's strace and gdb are installed when missing; where they cannot be, those
# tests say why they skipped.
tracers:
	@command -v strace >/dev/null && command -v gdb >/dev/null || \
	    { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	        strace gdb >/dev/null; } || \
	    echo "strace and gdb are not installed: tests/processes/test_liveness_traced.py will skip"

# The whole suite: the tests not marked solo two at a time (pytest-xdist), then the solo
# ones (tests/conftest.py lists them: bursts, timings, the machine's own limits) one at a
# time. PYTEST_ARGS passes options on to both, e.g. PYTEST_ARGS="-x".
PYTEST_ARGS ?=
TEST_WORKERS ?= 2
test: install lint slurm chromium tracers deepspeed-ops
	$(PY) -m pytest -n $(TEST_WORKERS) -m "not solo" $(PYTEST_ARGS)
	$(PY) -m pytest -m solo $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5: PYTEST_ARGS chose none

# Benchmarks (docs/benchmarks.md): one driver runs them all, writes
# benchmarks/results/latest.{json,md} and the scaling plots. BENCH_ARGS passes options on,
# e.g. `make bench BENCH_ARGS="--reps 7"` or `BENCH_ARGS="--quick --only core,tune"`.
# bench-ray runs the sections that have a Ray counterpart (RAY_ONLY; empty: all of them),
# alternating with Ray, into benchmarks/results/ray/.
BENCH_ARGS ?=
RAY_ONLY ?= actors,tune,deadlock
RAY_VENV ?= .venv-ray
RAY_PY := $(RAY_VENV)/bin/python
RAY_STAMP := $(RAY_VENV)/.installed-stamp
RAY_VERSION := 2.60.0

bench: install
	$(PY) -m benchmarks.suite $(BENCH_ARGS)

bench-check: install
	$(PY) -m benchmarks.suite --check $(BENCH_ARGS)

# Ray lives in a virtualenv of its own, made from scratch with the same interpreter as
# $(VENV); actorrt never depends on it.
$(RAY_STAMP):
	rm -rf $(RAY_VENV)
	$(PYTHON) -m venv $(RAY_VENV)
	$(RAY_PY) -m pip install --quiet --upgrade pip
	$(RAY_PY) -m pip install --quiet 'ray[tune]==$(RAY_VERSION)'
	touch $(RAY_STAMP)

bench-ray: install $(RAY_STAMP)
	$(PY) -m benchmarks.suite --ray --ray-python $(RAY_PY) --out benchmarks/results/ray \
		$(if $(RAY_ONLY),--only $(RAY_ONLY)) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(RAY_VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
