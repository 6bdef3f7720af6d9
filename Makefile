# Kassa: every step a developer or CI runs. `make run` and `make test` work
# on a fresh Debian machine: they install what is missing first.

SHELL := /bin/bash
SWIFT ?= swift
APT_PACKAGES := libwebsockets-dev libev-dev libcurl4-openssl-dev libsqlite3-dev liblz4-dev pkg-config
TEST_APT_PACKAGES := chromium prometheus haproxy nodejs
PIP_PACKAGES := websockets schemathesis playwright pyyaml openapi-spec-validator opentelemetry-proto
KASSA := .build/debug/kassa
TEST_WIDTH ?= 8
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test deps test-deps build build-release clean

## Install the system libraries, build, and run `kassa serve` on its defaults.
run: deps build
	$(KASSA) serve

## Install what the tests need, build, and run the whole test suite.
test: deps test-deps
	$(SWIFT) build --build-tests
	@# The run's output is long; on failure its failing lines are repeated last,
	@# where a CI log's tail shows them.
	@# At most TEST_WIDTH tests at once: with every test started together, two cores' worth of Swift
	@# threads had a backlog of seconds, and the in-process simulators missed the tests' upstream timeouts.
	@set -o pipefail; SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) $(SWIFT) test --skip-build 2>&1 | tee .build/test.log \
		|| { echo "== failed tests and their issues =="; grep -a -E "✘|error:|Expectation failed|recorded an issue" .build/test.log | head -80; exit 1; }

deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing $$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

test-deps:
	@[ -z "$(TEST_APT_PACKAGES)" ] || missing=$$(for p in $(TEST_APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing $$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@python3 -m pip --version >/dev/null 2>&1 || python3 -m ensurepip --upgrade
	@python3 -c "import websockets, schemathesis, playwright, yaml, openapi_spec_validator, opentelemetry.proto" 2>/dev/null || python3 -m pip install -q $(PIP_PACKAGES)

build:
	$(SWIFT) build

## The release binary as the image ships it and the benchmarks run it: Swift's runtime linked in
## (bench/release.sh says why).
build-release:
	$(SWIFT) build -c release --product kassa --static-swift-stdlib

clean:
	rm -rf .build
