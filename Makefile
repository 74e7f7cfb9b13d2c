# The README's commands. Everything a fresh machine needs is installed here.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= dev,tune,train,optuna,plots

.PHONY: install demo test lint bench bench-check clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m actorrt.examples.digits

lint: install
	$(VENV)/bin/ruff check actorrt tests benchmarks examples
	$(VENV)/bin/mypy

test: install lint
	$(PY) -m pytest

BENCHMARKS := core wire processes broker broker_sim

bench: install
	for b in $(BENCHMARKS); do $(PY) -m benchmarks.$$b || exit 1; done

bench-check: install
	status=0; for b in $(BENCHMARKS); do $(PY) -m benchmarks.$$b --check || status=1; done; exit $$status

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
