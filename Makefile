# fetchd: `make run` builds and starts the daemon; `make test` builds and runs every test.
SHELL := /bin/bash
.DEFAULT_GOAL := build

SWIFT ?= swift
# Debian packages the build, the tests and the shell client need.
APT_PACKAGES_FOR_LIBS := libcurl:libcurl4-openssl-dev jansson:libjansson-dev sqlite3:libsqlite3-dev hiredis:libhiredis-dev
APT_PACKAGES_FOR_CMDS := pkg-config:pkg-config jq:jq socat:socat nginx:nginx python3:python3 curl:curl openssl:openssl gcc:gcc valgrind:valgrind redis-server:redis-server systemd-socket-activate:systemd tmux:tmux
FETCHD_ARGS ?=
# The debug build and the tests (so CI, which runs `make test`) treat every compiler warning
# as an error. `make build SWIFT_BUILD_FLAGS=` builds without; the release build never uses it.
# Changing these flags rebuilds everything once.
SWIFT_BUILD_FLAGS ?= -Xswiftc -warnings-as-errors

.PHONY: deps build release run test unit-test integration-test clean

deps:
	@missing=""; \
	for pair in $(APT_PACKAGES_FOR_CMDS); do \
	  cmd=$${pair%%:*}; pkg=$${pair#*:}; \
	  if [ "$$cmd" = nginx ]; then test -x /usr/sbin/nginx || missing="$$missing $$pkg"; \
	  else command -v $$cmd >/dev/null 2>&1 || missing="$$missing $$pkg"; fi; \
	done; \
	for pair in $(APT_PACKAGES_FOR_LIBS); do \
	  lib=$${pair%%:*}; pkg=$${pair#*:}; \
	  if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists $$lib; then missing="$$missing $$pkg"; fi; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build: deps fetchctl
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

release: deps fetchctl
	$(SWIFT) build -c release

# Builds an optimised daemon and runs it in the foreground on the default socket.
run: release
	exec .build/release/fetchd $(FETCHD_ARGS)

unit-test: deps
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	$(SWIFT) test --skip-build

# The real fetchd binary against real nginx and the scriptable test server on loopback.
integration-test: deps fetchctl
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)
	FETCHD_BIN=$(CURDIR)/.build/debug/fetchd python3 tests/integration/run.py

test: unit-test integration-test python-typecheck

clean:
	rm -rf .build

# fetchctl, the command-line client: one C program on libfetchd (clients/fetchctl-src), built to
# clients/fetchctl (FETCHCTL_OUT) by `make`, `make run` and `make test`; its objects go under .build.
FETCHCTL_OUT ?= clients/fetchctl
.PHONY: fetchctl
fetchctl: deps
	$(MAKE) -s -C clients/fetchctl-src OUT=$(abspath $(FETCHCTL_OUT)) OBJ=$(CURDIR)/.build/fetchctl-c/obj

# mypy on the Python client (settings in clients/python/pyproject.toml). mypy comes from the
# environment, else is installed from PyPI into .build/mypy-venv once; when neither works the
# check is skipped and says so.
MYPY_VENV := $(CURDIR)/.build/mypy-venv
.PHONY: python-typecheck
python-typecheck:
	@if python3 -m mypy --version >/dev/null 2>&1; then mypy="python3 -m mypy"; \
	elif [ -x $(MYPY_VENV)/bin/mypy ] || { python3 -m venv $(MYPY_VENV) && $(MYPY_VENV)/bin/pip install -q mypy; } >/dev/null 2>&1; then \
	  mypy=$(MYPY_VENV)/bin/mypy; \
	else echo "python-typecheck: SKIPPED: mypy is not installed and could not be installed from PyPI"; exit 0; fi; \
	cd clients/python && $$mypy fetchd_client

# Benchmarks, not tests (`make test` never runs them): fetchd against curl, aria2 and a libcurl
# multi floor on loopback; prints one table and writes bench/results/<timestamp>.json.
# See docs/performance.md. BENCH_ARGS=--quick checks the harness in about a minute.
BENCH_ARGS ?=
.PHONY: bench bench-deps bench-profile bench-release

bench-deps: deps
	@missing=""; \
	for pair in aria2c:aria2 gcc:gcc perf:linux-perf; do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make bench-deps: installing$$missing"; \
	  if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# One release build at a time on this machine: the shared lock serialises them.
bench-release: deps
	flock /tmp/fetchd-build.lock $(SWIFT) build -c release

bench: bench-deps bench-release fetchctl
	python3 bench/run.py $(BENCH_ARGS)

# perf record -g on the release daemon under the small-GET c=64 load; prints the top of the report.
bench-profile: bench-deps bench-release
	python3 bench/run.py --profile $(BENCH_ARGS)
