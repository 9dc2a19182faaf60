# podledger: `make demo` runs it on local Kafka and a local apiserver; `make test` runs every test.
# Both install what is missing first: a virtualenv with the package and its test tools, the
# Kafka jars (Maven), etcd and kube-apiserver (Go), all cached under ~/.cache/podledger.

PYTHON ?= python3
VENV ?= .venv
CACHE ?= $(HOME)/.cache/podledger
export PIP_CACHE_DIR ?= $(CACHE)/pip
export PIP_DISABLE_PIP_VERSION_CHECK = 1
BIN := $(VENV)/bin
FOLDCORE := $(BIN)/podledger-foldcore
PYTEST_ARGS ?=
SHELL := /bin/bash

.PHONY: demo test lint typecheck layers analysis-tree install fetch os-tools clean foldcore-test

install: $(VENV)/.installed $(FOLDCORE)

$(VENV)/.installed: pyproject.toml deploy/constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "podledger needs Python >= 3.11: set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c deploy/constraints.txt -e '.[test]'
	@touch $@

# The native fold core (streams/foldcore/, Go, standard library only): `podledger fold` runs it
# where it covers the input, and the Python fold everywhere else, so without Go podledger still works.
FOLDCORE_SOURCES := $(shell find streams/foldcore -name '*.go' ! -name '*_test.go') streams/foldcore/go.mod
$(FOLDCORE): $(VENV)/.installed $(FOLDCORE_SOURCES)
	@if command -v go >/dev/null 2>&1; then \
	  cd streams/foldcore && CGO_ENABLED=0 go build -trimpath -buildvcs=false -o $(CURDIR)/$@ ./cmd/podfold; \
	else \
	  echo "Go not found: podledger fold folds in Python (install Go to build the native fold core)"; \
	fi

# The fold core's own tests and checks (the tests comparing it with the Python fold are in tests/).
foldcore-test: install
	@cd streams/foldcore && test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: the files above"; exit 1; }
	cd streams/foldcore && go vet ./... && go test -count=1 ./...

# The Kafka broker jars, etcd and kube-apiserver, resolved and built once into the cache.
fetch: install
	$(BIN)/podledger local fetch

# The OS tools some tests drive, each a Debian package of the same name, installed with apt-get
# when missing (as root): docker-compose validates deploy/docker-compose.yml (no Docker engine
# needed), prometheus scrapes `podledger metrics`, chromium renders `podledger ui`, kcat runs the
# kcat example. The real kubectl is built by `podledger local fetch` (the fetch step).
OS_TOOLS := docker-compose prometheus chromium kcat
os-tools:
	@for tool in $(OS_TOOLS); do \
	  command -v $$tool >/dev/null 2>&1 && continue; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing $$tool (Debian package) for the tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$tool >/dev/null || exit 1; \
	  else \
	    echo "$$tool is missing: install it (e.g. apt-get install $$tool)" >&2; exit 1; \
	  fi; \
	done

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
test: install fetch os-tools lint foldcore-test
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
