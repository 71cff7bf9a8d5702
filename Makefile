# a2a-grpc: every set-up step lives here, so a fresh machine needs only python3 and make.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
GEN_TMP := $(VENV)/gen-tmp
LOCK   := requirements/lock.txt
INSTALL ?= locked
LATEST_VENV := .venv/latest
FLOORS_VENV := .venv/floors

HOST ?= 127.0.0.1
PORT ?= 50051
ARGS ?=

GHZ_VERSION := v0.121.0
GHZ_STAMP   := $(VENV)/.ghz-$(GHZ_VERSION)
GRPCURL_VERSION := v1.9.3
GRPCURL_STAMP   := $(VENV)/.grpcurl-$(GRPCURL_VERSION)
HELM_VERSION := v4.3.2
HELM_STAMP   := $(VENV)/.helm-$(HELM_VERSION)
QUICK ?=

.PHONY: install venv lock test-latest test-floors tiers dist docs image gen check-gen doc-tables lint fmt typecheck test unit serve bench perf ghz grpcurl helm tools peers clean

install: $(STAMP)

# The virtualenv, made by a Python the project supports (3.11+). One left by an earlier try with
# an older Python, or whose interpreter no longer runs, is made again rather than reused.
SUPPORTED := import sys; sys.exit(sys.version_info < (3, 11))
venv:
	@$(PYTHON) -c '$(SUPPORTED)' 2>/dev/null || { \
		echo "make: $(PYTHON) is not Python 3.11 or newer; name one: make install PYTHON=python3.11" >&2; \
		exit 2; }
	@if test -e $(VENV) && ! $(PY) -c '$(SUPPORTED)' 2>/dev/null; then \
		echo "make: $(VENV) was made by an unsupported or broken Python; making it again" >&2; \
		rm -rf $(VENV); \
	fi
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)

# Installs exactly requirements/lock.txt (every package in .venv, with hashes), then the project
# itself, editable and built with the locked setuptools; re-installs when pyproject.toml or the
# lock changes, and the editable install picks up code edits. INSTALL=latest (make test-latest)
# installs instead the newest versions pyproject.toml's ranges allow, into a venv of its own;
# INSTALL=floors (make test-floors) the oldest.
$(STAMP): pyproject.toml $(LOCK)
	@$(MAKE) --no-print-directory venv VENV=$(VENV) PYTHON=$(PYTHON)
ifeq ($(INSTALL),latest)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade --upgrade-strategy eager -e '.[dev,postgresql]'
else ifeq ($(INSTALL),floors)
	@$(MAKE) --no-print-directory install VENV=.venv INSTALL=locked PYTHON=$(PYTHON)
	.venv/bin/uv pip install --quiet --python $(PY) --resolution lowest-direct -e '.[dev,postgresql]'
else
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r $(LOCK)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
endif
	touch $(STAMP)

# Writes requirements/lock.txt again from pyproject.toml (runtime + dev + postgresql extras) and
# requirements/build.in: newest versions the ranges and pins allow, hashes for every file, one
# lock for every supported Python (--universal). Then the image's two locks, held to the same
# versions (-c $(LOCK)): requirements/runtime.txt, the runtime dependencies and the postgresql
# extra (the image serves every store), and requirements/build.txt, what the image builds the
# wheel with. Commit them with the change that asked for it.
lock: $(STAMP)
	$(VENV)/bin/uv pip compile --quiet --universal --generate-hashes --python-version 3.11 \
		--custom-compile-command 'make lock' --extra dev --extra postgresql pyproject.toml \
		requirements/build.in -o $(LOCK)
	$(VENV)/bin/uv pip compile --quiet --universal --generate-hashes --python-version 3.11 \
		--custom-compile-command 'make lock' --extra postgresql -c $(LOCK) pyproject.toml \
		-o requirements/runtime.txt
	$(VENV)/bin/uv pip compile --quiet --universal --generate-hashes --python-version 3.11 \
		--custom-compile-command 'make lock' -c $(LOCK) requirements/build.in -o requirements/build.txt

# `make test` against the newest versions the ranges allow, in .venv/latest; not part of
# `make test`. Writes what it ran and how it ended to requirements/latest.txt (commit it), so the
# next upgrade starts from the last known result.
test-latest:
	@rm -f $(LATEST_VENV)/.installed
	@status=passed; \
	$(MAKE) --no-print-directory test VENV=$(LATEST_VENV) INSTALL=latest || status=failed; \
	{ echo "# make test-latest on $$(date -u +%Y-%m-%d) with $$($(LATEST_VENV)/bin/python -V): $$status"; \
	  $(LATEST_VENV)/bin/python -m pip freeze --exclude-editable --disable-pip-version-check; \
	} > requirements/latest.txt; \
	echo "make test-latest: $$status (versions in requirements/latest.txt)"; \
	test $$status = passed

# The unit and integration tiers on the oldest versions pyproject.toml's runtime ranges allow
# (uv's lowest-direct resolution, in .venv/floors): the floors the ranges promise are tested.
# CI runs it. What works is checked there; leaks are checked by the tiers on the locked
# versions: an object left unclosed warns when the garbage collector finds it, during
# whichever test runs then, so there it does not fail the run (no:unraisableexception).
test-floors:
	@rm -f $(FLOORS_VENV)/.installed
	$(MAKE) --no-print-directory tiers VENV=$(FLOORS_VENV) INSTALL=floors \
		TIERS_ARGS='-p no:unraisableexception'

# The unit and integration tiers alone, on whichever Python makes the venv: CI runs them on 3.13
# with `make tiers PYTHON=python3.13 VENV=.venv/py3.13` (the same lock, a venv of its own).
tiers: $(STAMP)
	$(PY) -m pytest tests/unit tests/integration $(TIERS_ARGS)

# protoc runs from the pinned grpcio-tools. The -I mapping makes the output import itself as
# a2a_grpc.generated.*, so nothing is patched afterwards.
gen: $(STAMP)
	rm -rf $(GEN_TMP) && mkdir -p $(GEN_TMP) generated
	$(PY) -m grpc_tools.protoc \
		-Ia2a_grpc/generated=proto \
		-I"$$($(PY) -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')" \
		-I"$$($(PY) -c 'import google.api, os; print(os.path.dirname(os.path.dirname(google.api.__path__[0])))')" \
		--python_out=$(GEN_TMP) --pyi_out=$(GEN_TMP) --grpc_python_out=$(GEN_TMP) \
		a2a_grpc/generated/a2a.proto a2a_grpc/generated/a2a_v03.proto
	cp $(GEN_TMP)/a2a_grpc/generated/a2a_pb2.py $(GEN_TMP)/a2a_grpc/generated/a2a_pb2.pyi \
		$(GEN_TMP)/a2a_grpc/generated/a2a_pb2_grpc.py \
		$(GEN_TMP)/a2a_grpc/generated/a2a_v03_pb2.py $(GEN_TMP)/a2a_grpc/generated/a2a_v03_pb2.pyi \
		$(GEN_TMP)/a2a_grpc/generated/a2a_v03_pb2_grpc.py generated/
	rm -rf $(GEN_TMP)

# Regenerates into the work tree and fails if anything differs from what is committed.
check-gen: gen
	@git diff --exit-code --stat -- generated/ || \
		(echo "generated/ is stale: run 'make gen' and commit the result" >&2; exit 1)
	@test -z "$$(git status --porcelain -- generated/)" || \
		(git status --porcelain -- generated/; echo "generated/ has untracked files: commit them" >&2; exit 1)

# The tables of docs/ made from the code (tests/doc_tables.py); a unit test fails when one is stale.
doc-tables: $(STAMP)
	$(PY) -m tests.doc_tables

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

fmt: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# mypy cannot follow setuptools' editable import hook, so it reads a symlinked view of the
# package laid out under its installed name.
typecheck: $(STAMP)
	rm -rf $(VENV)/typecheck && mkdir -p $(VENV)/typecheck/a2a_grpc
	for d in generated core server client cli; do ln -s "$$PWD/$$d" $(VENV)/typecheck/a2a_grpc/$$d; done
	cd $(VENV)/typecheck && MYPYPATH=. $(abspath $(VENV))/bin/mypy --config-file $(CURDIR)/pyproject.toml \
		-p a2a_grpc.core -p a2a_grpc.server -p a2a_grpc.client -p a2a_grpc.cli

# The official SDK's generated code registers the same proto symbols as ours, so the tests that
# import it (tests/interop/sdk_client: the SDK's client against our server) run in a pytest
# process of their own; everything else, including our client against the SDK's server (which
# runs as a child process), runs in the first.
# tests/interop/peers runs third-party A2A servers as child processes: the SDK's HTTP servers
# from .venv, and a Google ADK agent and the official SDK 0.3 each from an environment of its own
# (.venv/peers/adk, .venv/peers/sdk03: each brings its own a2a-sdk), which its fixture builds on
# first use from tests/interop/<peer>/requirements.txt (~30 s from an empty pip cache) and reuses
# while the pins are unchanged. `make peers` builds them ahead of time.
# The tools the examples of the README and docs/ call (grpcurl, ghz), so that its test runs those examples too.
# Without Go, or when they cannot be built, the README test skips those examples and says why.
# helm is for the chart's tests (tests/deploy), which skip without it.
tools: $(STAMP)
	@if command -v go >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory grpcurl ghz helm || \
			echo "make tools: grpcurl/ghz/helm not built; the README and chart tests skip what needs them" >&2; \
	else \
		echo "make tools: no Go toolchain; the README test skips the grpcurl and ghz examples, the chart tests skip" >&2; \
	fi

test: install check-gen lint typecheck docs tools
	$(PY) -m pytest tests --ignore=tests/interop/sdk_client
	$(PY) -m pytest tests/interop/sdk_client

# The fast tier alone: the protocol rules, codecs and stores without sockets (seconds).
unit: $(STAMP)
	$(PY) -m pytest tests/unit

serve: $(STAMP)
	$(VENV)/bin/a2a-grpc serve --host $(HOST) --port $(PORT) $(ARGS)

# The peers' own environments (tests/interop/peer_env.py): Google ADK and the official SDK 0.3;
# the tests build them too.
peers: $(STAMP)
	$(PY) -m tests.interop.adk.adk_env
	$(PY) -m tests.interop.sdk03.sdk03_env

# Installs a pinned ghz into .venv/bin when Go is present (v0.121.0 builds with Go 1.26).
ghz: $(GHZ_STAMP)

$(GHZ_STAMP): $(STAMP)
	@if command -v go >/dev/null 2>&1; then \
		GOBIN="$(abspath $(VENV))/bin" go install github.com/bojand/ghz/cmd/ghz@$(GHZ_VERSION) && touch $@; \
	else \
		echo "make ghz: no Go toolchain; make bench uses its Python load generator" >&2; \
	fi

# Installs a pinned grpcurl into .venv/bin (needs Go); `make test` builds it through `tools`.
grpcurl: $(GRPCURL_STAMP)

$(GRPCURL_STAMP): $(STAMP)
	GOBIN="$(abspath $(VENV))/bin" go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
	touch $@

# Installs a pinned helm into .venv/bin (needs Go); the chart's tests (tests/deploy) use it.
helm: $(HELM_STAMP)

$(HELM_STAMP): $(STAMP)
	GOBIN="$(abspath $(VENV))/bin" go install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	touch $@

# Ours vs the bare grpc.aio limit vs the official SDK, one table. Uses .venv/bin/ghz when present
# (make ghz), the Python closed loop otherwise. QUICK=1: a ~20 s smoke run. Never part of test.
bench: $(STAMP)
	$(PY) -m tests.load.bench $(if $(QUICK),--quick)

# Instructions per blocking SendMessage (callgrind; needs valgrind, ~2 minutes) against the
# committed reference tests/load/perf_reference.json; fails when more than 5 % above it.
perf: $(STAMP)
	$(PY) -m tests.load.instructions --compare

# The sdist and the wheel in dist/ (the wheel is built from the sdist, as an installer would),
# checked by twine as PyPI checks an upload.
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/*

# The API reference of the public Python API, generated from the docstrings by pdoc into
# build/api (open build/api/index.html); any warning fails it. tests/unit/test_api_reference.py
# fails when a public name of these modules has no docstring.
API_MODULES := a2a_grpc.server a2a_grpc.server.agent a2a_grpc.server.tasks.base a2a_grpc.server.tasks.registry a2a_grpc.client a2a_grpc.core.errors
docs: $(STAMP)
	rm -rf build/api
	$(PY) -W error -m pdoc --docformat markdown --no-show-source -o build/api $(API_MODULES)
	@echo "make docs: the API reference is in build/api/index.html"

# The server image (Containerfile) with podman, or docker when podman is absent, tagged
# $(IMAGE):<version> and $(IMAGE):dev. IMAGE_BUILD_FLAGS passes more build options: e.g. a CA
# bundle for pip behind a TLS-inspecting proxy (docs/deploy.md).
IMAGE ?= localhost/a2a-grpc
IMAGE_BUILD_FLAGS ?=
CONTAINER_ENGINE ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || \
	{ command -v docker >/dev/null 2>&1 && echo docker; })
VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
image:
	@test -n "$(CONTAINER_ENGINE)" || { echo "make image: neither podman nor docker is installed" >&2; exit 2; }
	$(CONTAINER_ENGINE) build $(IMAGE_BUILD_FLAGS) -f Containerfile \
		-t $(IMAGE):$(VERSION) -t $(IMAGE):dev .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist
