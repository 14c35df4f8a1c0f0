# Shoal: build, install, test, bench, lint. The README's commands call these.
CARGO  ?= cargo
PYTHON ?= python3
VENV   ?= .venv
VENV1  ?= target/venv-mcp1
PREFIX ?= $(HOME)/.cargo

NPM    ?= npm
NODE_DIR ?= tests/node

.PHONY: all build install man test test-all skipped venv node bench load lint fmt conformance fuzz clean-venv bench-compare build-time

all: build

build:
	$(CARGO) build --release --locked

# Installs `shoal` and `shoal-confine` (the sandbox step of a token principal's
# children, docs/leash.md) into $(PREFIX)/bin (default ~/.cargo/bin), reusing target/release.
# The installed copy is stripped (`install -s`): target/release/shoal keeps its debug
# info (`debug = 1` in Cargo.toml) for profiling.
install: build
	install -d $(PREFIX)/bin
	install -s -m 755 target/release/shoal $(PREFIX)/bin/shoal
	install -s -m 755 target/release/shoal-confine $(PREFIX)/bin/shoal-confine
	@echo "installed $(PREFIX)/bin/shoal and $(PREFIX)/bin/shoal-confine"

# The man page, generated from the CLI definition (src/main.rs, clap_mangen).
man: build
	target/release/shoal man > target/shoal.1
	@echo "wrote target/shoal.1 (view it with: man -l target/shoal.1)"

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

# Node 22 (the npm package `node`), the TypeScript MCP SDK and the MCP
# Inspector CLI for the real-client tests, pinned by $(NODE_DIR)/package-lock.json.
node: $(NODE_DIR)/node_modules/.ok

$(NODE_DIR)/node_modules/.ok: $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	cd $(NODE_DIR) && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

# Two tiers. `make test`: the unit tests and the integration binary
# (tests/it) without its slow tests; it needs only the Rust toolchain,
# python3 and git. `make test-all` (what .ci/run runs): everything, after
# installing the Python venvs and the Node packages for the SDK and
# Inspector tests. A test whose tool is missing (vim, jq, terraform, a
# venv, ...) is skipped with its reason and counted at the end;
# SHOAL_REQUIRE_ALL=1 (.ci/run sets it) makes a skip a failure.
SKIPPED ?= target/tmp/skipped-tests
# The slow tier, by test name: the Python and TypeScript SDKs, the Inspector,
# the load test, the PTY flood, the package managers.
SLOW := mcp_sdk:: pty_sdk:: tasks_sdk:: agent_tasks:: node_clients:: python_sdk \
        typescript_sdk leash_elicit::cap_request load:: flood_never_blocks \
        package_and_build_tools http_sdk::
test:
	@rm -f $(SKIPPED)
	$(CARGO) test --locked --workspace -- $(foreach t,$(SLOW),--skip $(t))
	@$(MAKE) --no-print-directory skipped

test-all: venv node
	@rm -f $(SKIPPED)
	$(CARGO) test --locked --workspace
	@$(MAKE) --no-print-directory skipped

skipped:
	@if [ -s $(SKIPPED) ]; then \
	  echo "$$(wc -l < $(SKIPPED)) tests skipped (SHOAL_REQUIRE_ALL=1 makes them fail):"; \
	  sed 's/^/  /' $(SKIPPED); \
	fi

bench:
	$(CARGO) bench --locked --bench shoal --bench lang --bench load --bench pty --bench adapters --bench leash --bench tasks --bench agent_tasks --bench takeover --bench attach --bench http --bench memory

# What a user waits for (a trivial exec, a spawn, `ls` and `git status` through the
# shim, a 50 MB capture, a journal query, a PTY read) and the daemon's memory, of
# this build beside BASE's, in one run (benches/compare.rs); rows over +10% are
# marked. BASE is a git revision, by default origin/main, else main, else (when
# that is HEAD) HEAD~1. Its release binary is built in a detached worktree under
# target/bench-base/ with its own target dir, both reused between runs
# (benches/build-base.sh). BASE=HEAD with a clean tree measures the noise.
BASE ?=
bench-compare:
	@base=$$(CARGO="$(CARGO)" sh benches/build-base.sh "$(BASE)" target/bench-base) && \
	  SHOAL_BENCH_BASE="$$base" SHOAL_BENCH_BASE_REV="$(or $(BASE),default base)" \
	  $(CARGO) bench --locked --bench compare

# Wall seconds of a release build from a clean, throw-away target dir with two
# jobs (what a contributor waits for after `cargo clean`). It loads both cores
# for minutes.
build-time:
	rm -rf target/build-time
	@start=$$(date +%s.%N) && \
	  CARGO_TARGET_DIR=target/build-time $(CARGO) build --release --locked -j 2 && \
	  awk -v a="$$start" -v b="$$(date +%s.%N)" \
	    'BEGIN { printf "release build from a clean target dir, -j 2: %.1f s\n", b - a }'
	rm -rf target/build-time

# 100 MCP clients over 10 sessions for 60 s (SHOAL_LOAD_SECS to change); p50/p99
# per tool, errors (must be 0), peak RSS. `make test` runs a 10 s version (tests/it/load.rs).
# Then 20 rounds of SIGKILL under concurrent clients per durability mode (`make test`: 2).
load:
	$(CARGO) bench --locked --bench load
	SHOAL_KILL_ROUNDS=20 $(CARGO) test --locked --test it journal::sigkill_under_concurrent_clients

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt

# The language conformance corpus against a release build (984 cases; fails
# below 975, i.e. under 99%).
CONFORMANCE ?= ../shared/conformance/run
conformance: build
	$(CONFORMANCE) --shoal target/release/shoal --min-pass 975

# cargo-fuzz targets (nightly; cargo-fuzz is installed from crates.io when
# missing), each for a fixed budget of FUZZ_SECS: the lexer and parser,
# kernel/MCP frame decoding and classification, value.get paths, shoal:// URIs,
# the config TOML, pty.send input, Leash policy files and effect lists.
# Built once, optimised with debug assertions and overflow checks, without a
# sanitizer (-s none: safe Rust; we hunt panics, aborts, stack overflows, hangs
# and OOMs; an ASan build takes over an hour on a 2-core machine). Each input
# runs on a 2 MiB stack (ulimit -s, the size tests/it/fuzz_regressions.rs uses);
# one taking over FUZZ_TIMEOUT s or FUZZ_RSS_MB of memory is a finding.
# Targets start from the checked-in corpus (tests/fuzz_corpus/<target>, read
# only; new inputs go to fuzz/corpus/). Every target runs even after another
# fails; crashes land in fuzz/artifacts/<target>/, and each becomes a file in
# tests/fuzz_corpus/<target>/, replayed on stable by tests/it/fuzz_regressions.rs.
FUZZ_TARGETS ?= parse frame valpath uri config pty_input policy effects
FUZZ_SECS    ?= 60
FUZZ_TIMEOUT ?= 10
FUZZ_RSS_MB  ?= 2048
FUZZ_BUILD   ?= -O -a -s none --codegen-units 16
fuzz:
	command -v cargo-fuzz >/dev/null || $(CARGO) install --locked cargo-fuzz
	cd fuzz && $(CARGO) +nightly fuzz build $(FUZZ_BUILD)
	cd fuzz && failed=; for t in $(FUZZ_TARGETS); do \
	  mkdir -p corpus/$$t; \
	  ( ulimit -s 2048; $(CARGO) +nightly fuzz run $(FUZZ_BUILD) $$t corpus/$$t ../tests/fuzz_corpus/$$t -- \
	    -max_total_time=$(FUZZ_SECS) -timeout=$(FUZZ_TIMEOUT) -rss_limit_mb=$(FUZZ_RSS_MB) \
	    -malloc_limit_mb=$(FUZZ_RSS_MB) -print_final_stats=1 ) || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz findings in:$$failed (see fuzz/artifacts/)"; exit 1; fi

clean-venv:
	rm -rf $(VENV) $(VENV1)
