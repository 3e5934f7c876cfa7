# The README's commands. Each target sets up what it needs first (.venv and node_modules).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ROWS ?= 200000
ENV ?= dev
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: setup demo test lint typecheck unit all-tests scan synth deploy clean bench-upload bench bench-graph bench-coldstart bench-sync bench-bulk schemas

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt runtime/requirements.txt runtime/requirements-parquet.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==26.3
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt -c constraints.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

demo: setup
	mkdir -p demo-out
	$(BIN)/mapload sample demo-out/ukpostcodes.csv --rows $(ROWS)
	$(BIN)/mapload run-local demo-out/ukpostcodes.csv --spec examples/postcodes.spec.json --report demo-out/report.json
	@echo "--- demo-out/report.json"; cat demo-out/report.json
	@echo "--- the table went with the run (in memory): to keep and query it, start \`mapload serve\` in another terminal, export what it prints, and run again"

# mapload upload (1, 4, 8 parts in flight) vs boto3 upload_file, and Prepare's decompression
# speed, on one local `mapload serve`; SIZE_MIB=1024 for a bigger file.
bench-upload: setup
	$(BIN)/python bench/upload.py $(if $(SIZE_MIB),--size-mib $(SIZE_MIB))

# The graph path: N-Quads lines checked and staged (plain, gzip), CSV records to statements,
# the local loader's store; LINES=1000000 for more.
bench-graph: setup
	$(BIN)/python bench/graph.py $(if $(LINES),--lines $(LINES))

# writeMode sync's monthly refresh against a plain put reload (issue 47); ROWS=1770000 for the
# postcode file's size.
bench-sync: setup
	$(BIN)/python bench/sync.py $(if $(ROWS),--rows $(ROWS))

# dynamodb.engine: the Worker's loop staging for bulk put items against the put loop (a stub client
# that only serializes), CPU a record and bytes a record; ROWS=1000000 for more.
bench-bulk: setup
	$(BIN)/python bench/bulk.py $(if $(ROWS),--rows $(ROWS))

# Each function's cold import in CPython 3.12: the package as built (precompiled) vs without .pyc.
bench-coldstart: setup
	$(BIN)/python bench/coldstart.py $(if $(RUNS),--runs $(RUNS))

# PutItem, batch_writer, awswrangler, the mapload worker and the embedded pipeline through a
# proxy adding a 20 ms round trip (and a write-unit limit), worker memory on a 10 MiB and a 1 GiB
# shard, Plan on 100 GB, each write mode, a 50 ms round trip, the CSV parsers, the edge endpoint
# check (1,000,000 vertices; --graph-vertices), the engines' CPU a record (bench/bulk.py), Parquet, and mapload upload against upload_file
# (docs/PERFORMANCE.md). BENCH_ARGS="--rows 20000 --big-mib 0" for a quick look.
bench: $(VENV)/.bench-installed
	$(BIN)/python bench/run.py $(BENCH_ARGS)

$(VENV)/.bench-installed: $(VENV)/.installed requirements-bench.txt constraints.txt
	$(BIN)/python -m pip install --quiet -r requirements-bench.txt -c constraints.txt
	touch $@

# schemas/input.schema.json from the input's pydantic models; schemas/config.schema.json from the
# settings model and docs/SETTINGS.md's tables from it (a test fails when any is stale).
schemas: setup
	$(BIN)/python scripts/input_schema.py
	$(BIN)/python scripts/config_schema.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy app.py stacks mapload runtime/logic runtime/adapters runtime/shards \
		runtime/archives runtime/plans runtime/reports runtime/graph_loads runtime/bulk_puts runtime/handlers

# The runtime's unit tests (tests/runtime: logic and adapters, on moto, no synth, no embedded
# run), without those marked slow. `make test` runs every test (all-tests). `python -m` puts the
# checkout on sys.path (a few of these import stacks/, which only other directories' conftest add).
unit: setup
	$(BIN)/python -m pytest -n 2 tests/runtime -m "not slow"

# Every test: infra (synth, cdk-nag), contract, runtime, e2e (the embedded run) and slow.
all-tests: setup
	$(BIN)/pytest -n 2 --dist loadgroup

$(VENV)-scan/.installed: requirements-scan.txt constraints-scan.txt
	test -x $(VENV)-scan/bin/python || $(PYTHON) -m venv $(VENV)-scan
	$(VENV)-scan/bin/python -m pip install --quiet -r requirements-scan.txt -c constraints-scan.txt
	touch $@

scan: setup $(VENV)-scan/.installed
	scripts/scan.sh

test: lint typecheck scan all-tests

# Bundles the Lambda package (no Docker) and prints its unzipped size.
synth: setup
	node_modules/.bin/cdk synth -c env=$(ENV) -o cdk.out

# What the environment holds now first (stacks/stateful.py): synth refuses a settings change that
# would replace or remove its table, buckets, Neptune cluster or data key.
deploy: setup
	$(BIN)/python scripts/deployed_state.py $(ENV) .cache/deployed-$(ENV).json
	node_modules/.bin/cdk deploy -c env=$(ENV) -c mapload-deployed=.cache/deployed-$(ENV).json 'Mapload-$(ENV)/*'

clean:
	rm -rf $(VENV) $(VENV)-scan node_modules cdk.out .cache demo-out
