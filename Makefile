# Quick start: `make demo` runs the main job on a built-in example; `make test` runs the tests.
# Each creates .venv and installs what it needs the first time: the demo only the package
# (torch, onnx, onnxruntime, ...), the tests and the other targets its dev extras too. torch
# stays pinned through constraints.txt (a bare torch requirement can pull a multi-GB build).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BASE := $(VENV)/.installed-base
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow wheel lint docs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(BASE): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install -q -c constraints.txt -e .
	touch $(BASE)

$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,docs]'
	touch $(STAMP) $(BASE)

demo: $(BASE)
	$(PY) -m msc demo

test: $(STAMP)
	MSC_CHECK=1 $(PY) -m pytest -n 2 --dist loadgroup -q -m "not slow"

# The sweeps marked slow (each a minute or more on 2 cores): CI runs them after `make test`.
test-slow: $(STAMP)
	MSC_CHECK=1 $(PY) -m pytest -n 2 --dist loadgroup -q -m slow

# The sdist and wheel, installed into a fresh venv outside the checkout: `msc demo` and a
# conversion run from there (what CI checks).
wheel: $(STAMP)
	PY=$(PY) PYTHON=$(PYTHON) bash .ci/wheel

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

# The docs site: regenerate the generated pages (ops from the registries, the CLI reference
# from the parser, performance from bench/results), then build strictly into site/: a warning,
# a broken link or a broken anchor fails the build.
docs: $(STAMP)
	$(PY) -m msc.ops.doc > docs/ops.md.tmp && mv docs/ops.md.tmp docs/ops.md
	$(PY) -c "import codegen.relax as r; print(*sorted(r.EMITTERS), sep=chr(10))" > codegen/relax/ops.txt
	$(PY) docs/tools/cli_reference.py > docs/cli.md.tmp && mv docs/cli.md.tmp docs/cli.md
	$(PY) bench/report.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build dist *.egg-info site
