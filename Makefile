# ctxembed: `make run` shows the main job on the shipped vectors, `make test` runs the suite.
# Both create .venv when it is missing and install what they need into it.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# A CPU build of torch for the equivalence tests, when one lies on this machine (plain
# `pip install torch` would pull several GB of CUDA packages, so it is never done here).
TORCH_WHEEL ?= $(firstword $(wildcard /opt/wheels/torch-*+cpu-*.whl))

.PHONY: run test lint bench wheel clean

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

run: $(VENV)/.installed
	$(BIN)/ctxembed compare --word bank \
		"we sat on the river bank" "fishermen lined the grassy bank of the stream" \
		"I deposited money in the bank" "she opened a savings account at the bank"
	$(BIN)/ctxembed neighbors "we sat on the river bank" --word bank -k 8
	$(BIN)/ctxembed neighbors "I deposited money in the bank" --word bank -k 8

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check ctxembed tests scripts benchmarks

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/run.py

wheel: $(VENV)/.installed-dev
	$(BIN)/python -m build --wheel --outdir dist .

clean:
	rm -rf $(VENV) dist build .pytest_cache .ruff_cache .hypothesis
