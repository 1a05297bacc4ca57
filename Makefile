# vmmu — build, run, test. `make run` and `make test` are all a newcomer needs: both create
# .venv/ in the repository and build the Rust engine into it on first use.

PYTHON3 ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
PY      := $(BIN)/python
CARGO   ?= cargo
# Rebuild the extension only when something it is built from changed.
RUST_SOURCES := Cargo.toml Cargo.lock $(shell find crates -type f \( -name '*.rs' -o -name '*.toml' \) 2>/dev/null)
STAMP   := $(VENV)/.vmmu-installed

# The default job of `make run`: native vs nested paging on uniform random references over 1 GiB.
RUN_ARGS ?= --machine bhargava08 --workload random:footprint=1G,refs=2M

install: $(STAMP) tool

# The Valgrind tool behind `vmmu record`; installs valgrind when missing and root,
# else says exactly what to install.
tool:
	$(MAKE) --no-print-directory -C tools/vg-memtrace

$(PY):
	$(PYTHON3) -m venv $(VENV)

$(STAMP): pyproject.toml $(RUST_SOURCES) | $(PY)
	$(BIN)/pip install --quiet 'maturin>=1.7,<2'
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin develop --release --extras dev --quiet
	@touch $@

run: install
	@mkdir -p results
	$(BIN)/vmmu compare $(RUN_ARGS) --report results/report.html

# The Rust tests build and run while test-tools downloads and installs what the Python tests
# need (network and disk beside the compiler's CPU); its output is printed when both are done.
test: install tool
	@$(MAKE) --no-print-directory test-tools > $(VENV)/test-tools.log 2>&1 & tools=$$!; \
	$(MAKE) --no-print-directory test-rust; rust=$$?; \
	wait $$tools; tools_rc=$$?; cat $(VENV)/test-tools.log; \
	[ $$rust = 0 ] && [ $$tools_rc = 0 ] || exit 1; \
	$(MAKE) --no-print-directory test-python

# Rust tests build in their own profile, `dev` at opt-level 1 without debug info (defined here,
# not in Cargo.toml, output in target/quicktest/): measured on 2 cores, a from-scratch
# `cargo test --workspace` takes 2m45s this way against 6m20s with --release (LTO links every
# test binary), and the tests themselves run in seconds either way.
TEST_PROFILE := --config 'profile.quicktest.inherits="dev"' \
	--config 'profile.quicktest.opt-level=1' --config 'profile.quicktest.debug=false' \
	--profile quicktest

# Property tests draw from a fixed seed in `make test`, so CI is deterministic; run
# `cargo test` directly (or set PROPTEST_RNG_SEED) to explore new cases. The recording tests
# need Valgrind and the vg-memtrace tool, so `tool` comes first; without them they fail unless
# VMMU_SKIP_VALGRIND=REASON is set outside CI (docs/recording.md, "Testing").
test-rust: tool
	PROPTEST_RNG_SEED=$${PROPTEST_RNG_SEED:-20261122} $(CARGO) test --workspace $(TEST_PROFILE)

# The Python tests run as two pytest processes at once (tools/test/pytest_shards.py: the
# tests that record real programs beside the rest); PYTEST_ARGS go to both (`-x`, `-k EXPR`).
PYTEST_ARGS ?=
test-python: install test-tools
	$(PY) tools/test/pytest_shards.py tests/python $(PYTEST_ARGS)

# Tools some Python tests need beyond the package: Ray (the sweep's cluster backend) in the
# venv, headless Chromium (the report test) and the Debian packages of the suite entries the
# tests record (tests/python/test_suite.py: redis, gcc, swim), installed when root. A failed
# install is logged to $(VENV)/*-install.log; the test that needs the tool then fails under
# CI=true (.ci/run sets it) and is reported skipped with that log's last lines elsewhere.
RAY_REQ := ray>=2.9
SUITE_TEST_PACKAGES := redis-server gcc
test-tools: install
	@$(PY) -c 'import ray' 2>/dev/null || $(BIN)/pip install --quiet '$(RAY_REQ)' \
		> $(VENV)/ray-install.log 2>&1 || echo "note: Ray did not install, see $(VENV)/ray-install.log"
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ]; then \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
			> $(VENV)/chromium-install.log 2>&1 || echo "note: chromium did not install, see $(VENV)/chromium-install.log"; \
	else echo "not root: cannot apt-get install chromium" > $(VENV)/chromium-install.log; fi
	@command -v redis-server >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ]; then \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SUITE_TEST_PACKAGES); } \
			> $(VENV)/suite-install.log 2>&1 || echo "note: $(SUITE_TEST_PACKAGES) did not install, see $(VENV)/suite-install.log"; \
	else echo "not root: cannot apt-get install $(SUITE_TEST_PACKAGES)" > $(VENV)/suite-install.log; fi

# Speed on the figures of docs/performance.md, each beside its target with the ratio; writes
# results/bench.json (and the sweep's figures to results/bench-sweep.json). BENCH_ARGS are the
# engine bench's own (`--runs 3`, `--only decode,replay-native`, `--list`). The recording
# figure needs the vg-memtrace tool, hence `tool`. Run on an idle machine: rates are wall
# clock; CPU seconds are written beside them. The sweep's figures are left out when BENCH_ARGS
# lists the figures or picks some with `--only`.
BENCH_ARGS ?=
bench: install
	@case " $(BENCH_ARGS) " in *" --list "*|*" --only "*) ;; \
		*) $(MAKE) --no-print-directory bench-sweep ;; esac
	$(CARGO) build --release -p vmmu-bench --quiet
	target/release/vmmu-bench --vmmu $(BIN)/vmmu --json results/bench.json $(BENCH_ARGS)

# Sweep overhead per point and the speed-up from 1 to N workers; writes results/bench-sweep.json.
bench-sweep: install
	@mkdir -p results
	$(PY) tools/bench/sweep.py --json results/bench-sweep.json

# The same engine bench on BASE (a commit, branch or tag, built in a temporary worktree) and on
# the working tree, figure by figure: `make bench-compare BASE=main`.
bench-compare: install
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=rev"; exit 2; }
	tools/bench/compare.sh $(BASE) $(BENCH_ARGS)

# Criterion micro-benchmarks of the hardware structures and simulated memory.
bench-micro:
	$(CARGO) bench -p vmmu-core --bench engine

lint: install
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(BIN)/ruff check python tests tools
	$(BIN)/ruff format --check python tests tools

fmt: install
	$(CARGO) fmt --all
	$(BIN)/ruff check --fix python tests tools
	$(BIN)/ruff format python tests tools

# Records the real-program trace library: builds the Valgrind tool, then records.
traces: install
	tools/traces/record.sh

clean:
	rm -rf $(VENV) target python/vmmu/*.so .pytest_cache .ruff_cache
