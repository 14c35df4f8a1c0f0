# Shoal: build, install, test, bench, lint. The README's commands call these.
CARGO  ?= cargo
PYTHON ?= python3
VENV   ?= .venv
VENV1  ?= target/venv-mcp1
PREFIX ?= $(HOME)/.cargo

.PHONY: all build install test venv bench lint fmt conformance clean-venv

all: build

build:
	$(CARGO) build --release --locked

# Installs `shoal` into $(PREFIX)/bin (default ~/.cargo/bin), reusing target/release.
install: build
	install -d $(PREFIX)/bin
	install -m 755 target/release/shoal $(PREFIX)/bin/shoal
	@echo "installed $(PREFIX)/bin/shoal"

# Python venvs with the official MCP SDK for the client tests:
# $(VENV) has mcp 2.x, $(VENV1) has mcp 1.x.
venv: $(VENV)/.mcp-ok $(VENV1)/.mcp-ok

$(VENV)/.mcp-ok:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "mcp>=2"
	touch $@

$(VENV1)/.mcp-ok:
	mkdir -p $(dir $(VENV1))
	$(PYTHON) -m venv $(VENV1)
	$(VENV1)/bin/pip install --quiet --disable-pip-version-check "mcp<2"
	touch $@

test: venv
	$(CARGO) test --locked

bench:
	$(CARGO) bench --locked --bench shoal --bench lang --bench adapters

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt

# The language conformance corpus against a release build (984 cases; fails
# below 975, i.e. under 99%).
CONFORMANCE ?= ../shared/conformance/run
conformance: build
	$(CONFORMANCE) --shoal target/release/shoal --min-pass 975

clean-venv:
	rm -rf $(VENV) $(VENV1)
