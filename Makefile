# The two README commands (`make demo`, `make test`) work on a fresh machine with Python 3.11.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python

# litellm: use the bundled price table, never fetch it at import; no tokenizer downloads.
export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true
export HF_HUB_OFFLINE := 1
# llama-cpp-python has no wheel on PyPI: pip compiles it once (minutes) and caches the wheel.
# A portable build (no -march=native) runs as fast here and works on any x86-64 with AVX2.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

.PHONY: demo test lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Stamps: reinstall only when pyproject.toml changes. The test suite includes the tests of the
# embedded local judge (marked local_model), so it installs the `local` extra too.
$(VENV)/.installed-dev: pyproject.toml | $(PY)
	@$(PY) -c "import llama_cpp" 2>/dev/null || echo ">>> Installing llama-cpp-python for the local-judge tests: the first build compiles llama.cpp (several minutes on 2 cores); pip caches the wheel afterwards."
	$(PY) -m pip install --quiet -e '.[dev,local]'
	touch $@

$(VENV)/.installed-local: pyproject.toml | $(PY)
	@$(PY) -c "import llama_cpp" 2>/dev/null || echo ">>> Installing the embedded local judge (llama-cpp-python). The first build compiles llama.cpp and takes several minutes on 2 cores; pip caches the wheel afterwards."
	$(PY) -m pip install --quiet -e '.[local]'
	touch $@

demo: $(VENV)/.installed-local
	$(BIN)/otel-scorers demo

test: $(VENV)/.installed-dev
	$(PY) -m pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check otel_scorers tests examples
	$(BIN)/mypy

bench: $(VENV)/.installed-dev
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
