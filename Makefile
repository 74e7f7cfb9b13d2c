# The README's commands. Everything a fresh machine needs is installed here.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= dev,tune,train

.PHONY: install demo test lint bench bench-check clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) examples/demo.py

lint: install
	$(VENV)/bin/ruff check actorrt tests benchmarks examples
	$(VENV)/bin/mypy

test: install lint
	$(PY) -m pytest

bench: install
	$(PY) -m benchmarks.core

bench-check: install
	$(PY) -m benchmarks.core --check

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
