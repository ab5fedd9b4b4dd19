# Two entry points: `make demo` (the main job on the embedded default) and `make test`.
# Both create the project's virtual environment at .venv/ when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.memtrial-installed
EXTRAS := test,embeddings,chroma,dask,lancedb,txtai,mem0
# Test processes; each test file runs whole on one of them (its module fixtures are built once).
TEST_WORKERS ?= 2

.PHONY: demo demo-deps test test-deps lint bench clean-venv

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "memtrial needs Python >= 3.11; set PYTHON=python3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[$(EXTRAS)]'
	touch $(STAMP)

# What the embedded default needs (bubblewrap, util-linux): installed when root with apt-get, else one
# line naming the fix and exit 2, before the venv is built or the run starts.
demo-deps:
	@bash scripts/install_demo_deps.sh

demo: demo-deps $(STAMP)
	$(BIN)/memtrial corpus fetch  # set-up: the pinned upstream releases into the machine's cache (runs never download)
	$(BIN)/memtrial run

# What the tests drive for real: bubblewrap and a private dockerd (apt, needs root), the MCP memory
# server and the Claude Code CLI (npm, pinned). Without them the tests that need them skip and say why.
test-deps:
	-bash scripts/install_test_deps.sh
	-bash scripts/install_mcp_memory.sh
	-bash scripts/install_claude_code.sh >/dev/null

# The style floor ([tool.ruff] and [tool.mypy] in pyproject.toml); `make test` runs it first.
lint: $(STAMP)
	$(BIN)/ruff check tasks_lib flows tests benchmarks
	$(BIN)/mypy

test: $(STAMP) test-deps lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: $(STAMP)
	command -v rg >/dev/null || apt-get install -y ripgrep
	$(BIN)/python benchmarks/bench_prepare.py
	$(BIN)/python benchmarks/bench_audit.py
	$(BIN)/python benchmarks/bench_corpus_check.py --rounds 1

clean-venv:
	rm -rf $(VENV)
