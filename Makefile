# Herald — two commands on a fresh machine:
#   make run    PostgreSQL + migrations + demo data + worker + a demo burst, then a summary
#   make test   the same set-up, then the whole test suite against that real PostgreSQL
SHELL := /bin/bash
.DEFAULT_GOAL := help
SWIFT ?= swift
PG := scripts/pg.sh
ENV := . .run/pg.env

.PHONY: help deps pg-start pg-stop build build-release migrate run demo test chaos validate-deploy lint format bench bench-churn bench-worker bench-pair bench-peers clean

help:
	@echo "make run     start PostgreSQL, migrate, seed the demo, run the worker, show what happened"
	@echo "make test    start PostgreSQL and run every test against it"
	@echo "make chaos   kill -9, PostgreSQL restart, provider outage, SIGTERM under load (full sizes)"
	@echo "make bench   benchmark: enqueue and drain 100,000 jobs through the sink provider"
	@echo "make bench-worker  worker CPU per message and peak RSS of herald run, per provider"
	@echo "make bench-pair BASE=<checkout>  this build's bench against another checkout's, alternating (drain jobs/s, worker CPU a job)"
	@echo "make bench-peers  PgQueuer 1.6 (pip, throwaway venv), this build and the floor of its writes (pgbench) on the same PostgreSQL, with ratios"
	@echo "make lint    swift format lint --strict (.swift-format) and ShellCheck on scripts/"
	@echo "make format  rewrite the Swift files with swift format (.swift-format)"
	@echo "make pg-stop stop the local PostgreSQL cluster"

deps:
	@$(PG) install

pg-start: deps
	@$(PG) start

pg-stop:
	@$(PG) stop

build: deps
	$(SWIFT) build

build-release: deps
	$(SWIFT) build -c release

migrate: pg-start build
	@$(ENV) && .build/debug/herald migrate

run: pg-start build-release
	@scripts/demo.sh

demo: run

# The chaos suite restarts PostgreSQL, so it runs on its own after the others (short sizes here;
# `make chaos` runs the full sizes). The fault suite runs alone after it: its outages are timed
# in real seconds against the default 10 s request timeout, and the first phase runs every
# other suite at once on two cores. The heaviest database suites (the schema upgrade from every
# released version, the kill switch under two workers and a 100,000-job cancel, four replicas
# hammering the same users, two replicas draining one app's flood while another app sends) run in a phase of their own first, so they do not starve the provider tests' request timeouts.
HEAVY = SchemaTests|KillSwitchTests|PerRecipientTests|FairnessTests
test: pg-start build
	@scripts/chromium.sh
	@$(ENV) && set -o pipefail && $(SWIFT) build --build-tests && \
	  HERALD_BINARY=$$(pwd)/.build/debug/herald $(SWIFT) test --skip-build --filter '$(HEAVY)' 2>&1 \
	    | tee .run/test.log; \
	  status=$$?; \
	  HERALD_BINARY=$$(pwd)/.build/debug/herald $(SWIFT) test --skip-build --skip ChaosTests --skip FaultHonestyTests \
	    --skip '$(HEAVY)' 2>&1 | tee -a .run/test.log || status=1; \
	  HERALD_CHAOS=short HERALD_BINARY=$$(pwd)/.build/debug/herald $(SWIFT) test --skip-build --filter ChaosTests 2>&1 \
	    | tee -a .run/test.log || status=1; \
	  HERALD_BINARY=$$(pwd)/.build/debug/herald $(SWIFT) test --skip-build --filter FaultHonestyTests 2>&1 \
	    | tee -a .run/test.log || status=1; \
	  grep -hE '^(chaos|fault) ' .run/test.log || true; \
	  $(PG) stop; \
	  scripts/validate-deploy.sh || status=1; \
	  scripts/lint-swift.sh || status=1; \
	  scripts/lint-scripts.sh || status=1; \
	  scripts/check-newcomer.sh || status=1; \
	  scripts/test-summary.sh .run/test.log; exit $$status

bench: pg-start build-release
	@$(ENV) && scripts/bench.sh $(BENCH_ARGS)

bench-churn: pg-start build-release
	@$(ENV) && scripts/bench.sh --churn $(BENCH_ARGS)

bench-worker: pg-start build-release
	@$(ENV) && scripts/bench-worker.sh

# PgQueuer 1.6 (installed from PyPI into .run/peers-venv) against herald-bench on this checkout's
# PostgreSQL: [PEER_JOBS=50000] [ROUNDS=1]; pg_stat_statements per run (loaded on first use).
# Each round also drains the floor: the rows Herald writes per job, alone, in pgbench (scripts/peers/floor.*).
bench-peers: pg-start build-release
	@$(ENV) && scripts/bench-peers.sh

# This checkout's bench against another checkout's release build, alternating: BASE=<dir> [ROUNDS=3]
bench-pair: pg-start build-release
	@$(ENV) && scripts/bench-pair.sh $(BASE) $(or $(ROUNDS),3)

chaos: pg-start build
	@$(ENV) && set -o pipefail && $(SWIFT) build --build-tests && \
	  HERALD_CHAOS=full HERALD_BINARY=$$(pwd)/.build/debug/herald $(SWIFT) test --skip-build --filter ChaosTests 2>&1 \
	    | tee .run/chaos.log; status=$$?; \
	  echo; grep -h '^chaos ' .run/chaos.log; scripts/test-summary.sh .run/chaos.log; exit $$status

lint:
	@scripts/lint-swift.sh
	@scripts/lint-scripts.sh

format:
	@scripts/lint-swift.sh format

validate-deploy:
	@scripts/validate-deploy.sh

clean: pg-stop
	rm -rf .build .run .pgdata
