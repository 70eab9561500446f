# Quick start: `make demo` runs the main job on a built-in example; `make test` runs the tests.
# Each creates .venv and installs what it needs the first time.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test wheel lint docs bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m msc demo

test: $(STAMP)
	MSC_CHECK=1 $(PY) -m pytest -n 2 --dist loadgroup -q

# The sdist and wheel, installed into a fresh venv outside the checkout: `msc demo` and a
# conversion run from there (what CI checks).
wheel: $(STAMP)
	PY=$(PY) PYTHON=$(PYTHON) bash .ci/wheel

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

docs: $(STAMP)
	$(PY) -m msc.ops.doc > docs/ops.md

clean:
	rm -rf $(VENV) build dist *.egg-info
