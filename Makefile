# podledger: `make demo` runs it on local Kafka and a local apiserver; `make test` runs every test.
# Both install what is missing first: a virtualenv with the package and its test tools, the
# Kafka jars (Maven), etcd and kube-apiserver (Go), all cached under ~/.cache/podledger.

PYTHON ?= python3
VENV ?= .venv
CACHE ?= $(HOME)/.cache/podledger
export PIP_CACHE_DIR ?= $(CACHE)/pip
export PIP_DISABLE_PIP_VERSION_CHECK = 1
BIN := $(VENV)/bin
PYTEST_ARGS ?=
SHELL := /bin/bash

.PHONY: demo test lint typecheck layers analysis-tree install fetch compose-tool prometheus-tool chromium-tool consumer-tools clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml deploy/constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "podledger needs Python >= 3.11: set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c deploy/constraints.txt -e '.[test]'
	@touch $@

# The Kafka broker jars, etcd and kube-apiserver, resolved and built once into the cache.
fetch: install
	$(BIN)/podledger local fetch

# A compose implementation to validate deploy/docker-compose.yml (no Docker engine needed).
compose-tool:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing docker-compose (Debian package) to validate deploy/docker-compose.yml"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; \
	  else \
	    echo "docker-compose is missing: install it (e.g. apt-get install docker-compose)" >&2; exit 1; \
	  fi; }

# Prometheus, which scrapes `podledger metrics` in tests/integration/test_prometheus.py.
prometheus-tool:
	@command -v prometheus >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing prometheus (Debian package) to scrape podledger metrics in the tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	  else \
	    echo "prometheus is missing: install it (e.g. apt-get install prometheus)" >&2; exit 1; \
	  fi; }

# Headless Chromium, which loads `podledger ui` in tests/integration/test_ui.py.
chromium-tool:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (Debian package) to test the audit timeline UI in a browser"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	  else \
	    echo "chromium is missing: install it (e.g. apt-get install chromium)" >&2; exit 1; \
	  fi; }

# The consumer examples' tool kcat (Debian package; examples/, tests/integration/test_examples.py).
# The real kubectl is built by `podledger local fetch` (the fetch step).
consumer-tools: install
	@command -v kcat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing kcat (Debian package) for the kcat example"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kcat >/dev/null; \
	  else \
	    echo "kcat is missing: install it (e.g. apt-get install kcat)" >&2; exit 1; \
	  fi; }

lint: install typecheck layers
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy and import-linter read the package as it installs: schemas/, streams/, agents/ and read/
# become podledger.schemas|streams|agents|read, so both run over a copy laid out that way.
ANALYSIS := $(VENV)/analysis
analysis-tree: install
	@rm -rf $(ANALYSIS) && mkdir -p $(ANALYSIS)
	@cp -r podledger $(ANALYSIS)/podledger
	@for d in schemas streams agents read; do cp -r $$d $(ANALYSIS)/podledger/$$d; done

# Type-check the package; errors name the files in this tree, not in the copy.
typecheck: analysis-tree
	@cd $(ANALYSIS) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p podledger 2>&1 \
	  | sed -E 's#^podledger/(schemas|streams|agents|read)/#\1/#'; exit $${PIPESTATUS[0]}

# The layers and the pure core (pyproject.toml [tool.importlinter]).
layers: analysis-tree
	@cd $(ANALYSIS) && $(CURDIR)/$(BIN)/lint-imports --config $(CURDIR)/pyproject.toml --no-cache --no-logo

# Both halves at once: the unit half (CPU-bound fuzzers, niced) beside the integration half (which
# mostly waits on the broker and the apiserver); the unit log is printed after. With PYTEST_ARGS,
# one plain pytest run of what they name.
test: install fetch compose-tool prometheus-tool chromium-tool consumer-tools lint
ifeq ($(strip $(PYTEST_ARGS)),)
	@mkdir -p .test-logs; \
	nice -n 10 $(BIN)/pytest tests/unit > .test-logs/unit.log 2>&1 & unit=$$!; \
	$(BIN)/pytest tests/integration; integration=$$?; \
	wait $$unit; unit_rc=$$?; \
	echo "--- tests/unit (exit $$unit_rc) ---"; cat .test-logs/unit.log; \
	exit $$(( integration || unit_rc ))
else
	$(BIN)/pytest $(PYTEST_ARGS)
endif

demo: install
	$(BIN)/podledger demo

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
