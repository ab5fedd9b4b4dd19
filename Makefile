# Two entry points: `make demo` (the main job on the embedded default) and `make test`.
# Both create the project's virtual environment at .venv/ when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.memtrial-installed

.PHONY: demo test bench clean-venv

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "memtrial needs Python >= 3.11; set PYTHON=python3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,embeddings]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/memtrial run

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_prepare.py

clean-venv:
	rm -rf $(VENV)
