# tickwork: `make demo` runs a worker on the embedded SQLite default; `make test` runs everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= $(CURDIR)/.demo
DEMO_SECONDS ?= 16

.PHONY: demo test lint typecheck docs-site docs unit suite django6 test-stress faults bench bench-peers bench-peers-postgres clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --config-settings editable_mode=compat -e '.[dev,redis,postgres,spark,cassandra,holidays,otel,dashboard,encryption]'
	touch $(STAMP)

demo: $(STAMP)  # DEMO_SECONDS=16, DEMO_DIR=.demo (its database)
	rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	TICKWORK_BACKEND=sqlite:///$(DEMO_DIR)/tickwork.db $(BIN)/python -m examples.demo --seconds $(DEMO_SECONDS)
	TICKWORK_BACKEND=sqlite:///$(DEMO_DIR)/tickwork.db $(BIN)/tickwork schedules
	TICKWORK_BACKEND=sqlite:///$(DEMO_DIR)/tickwork.db $(BIN)/tickwork stats

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# the docs site (mkdocs-material; the API reference from the docstrings by mkdocstrings),
# built in strict mode: a broken link, anchor or reference fails the build
docs-site: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --quiet

docs: $(STAMP)  # the docs site served at http://127.0.0.1:8000, rebuilt as pages change
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8000

unit: $(STAMP)  # the fast tests only: no server, a few seconds
	$(BIN)/pytest -q tests/unit

NODE_PRODUCERS := examples/node/node_modules/.installed

$(NODE_PRODUCERS): examples/node/package-lock.json  # the Node.js producers' packages
	cd examples/node && npm ci --silent --no-audit --no-fund
	touch $@

# the suite runs in $(JOBS) processes (pytest-xdist), each starting the servers it needs
# (each its own Cassandra node and Spark session when it comes to a test on them): most
# tests wait on servers and workers, so two processes use the two cores they share (three
# ran the suite in 1,373 s against 1,774 s with two, but each of three whole runs with
# three met another test that the load made fail: JOBS=3 once they are all found;
# bench/NOTES.md, session 30)
JOBS ?= 2

suite: $(STAMP) $(NODE_PRODUCERS)  # every test: unit, contract, integration, faults (starts real servers)
	$(BIN)/pytest -q -n $(JOBS) --dist loadgroup --durations=25

# the Django tests again on Django 6, whose tasks framework is built in (Python 3.12)
# (python3.12 on the PATH, else pyenv's newest 3.12)
PYTHON312 ?= $(or $(shell command -v python3.12 >/dev/null 2>&1 && python3.12 -c 'import sys; print(sys.executable)' 2>/dev/null),$(shell PYENV_VERSION=$$(pyenv versions --bare 2>/dev/null | grep '^3\.12' | tail -1) python3.12 -c 'import sys; print(sys.executable)' 2>/dev/null),python3.12)
DJANGO6 := .venv-django6
DJANGO_TESTS := tests/integration/test_django_tasks.py tests/integration/test_django_project.py tests/integration/test_django_dashboard.py tests/integration/test_django_site.py

$(DJANGO6)/.installed: pyproject.toml Makefile
	$(PYTHON312) -m venv $(DJANGO6)
	$(DJANGO6)/bin/pip install --quiet --config-settings editable_mode=compat -e '.[redis,postgres,dashboard]' "django>=6,<7" "pytest>=8" "pytest-timeout>=2.3" "pytest-asyncio>=0.24" "httpx2>=2.0" "selenium>=4.20"
	touch $@

django6: $(STAMP) $(DJANGO6)/.installed
	$(DJANGO6)/bin/pytest -q -p no:cacheprovider $(DJANGO_TESTS)

test: lint typecheck docs-site suite django6

# the integration tests with two CPU hogs beside them: a test must not need the machine
# to itself (run it twice before you stop when you touch timing)
test-stress: $(STAMP) $(NODE_PRODUCERS)
	$(BIN)/python -m tests.stress --hogs 2 -- $(BIN)/pytest -q -p no:cacheprovider tests/integration

FAULTS_OUT := bench/results/faults.jsonl

faults: $(STAMP)  # the fault suite at full size (minutes per backend); a table of results
	rm -f $(FAULTS_OUT) bench/results/failover.jsonl
	TICKWORK_FAULTS_FULL=1 TICKWORK_FAULTS_OUT=$(CURDIR)/$(FAULTS_OUT) $(BIN)/pytest -q tests/faults; \
	status=$$?; $(BIN)/python -m tests.faults.report $(FAULTS_OUT) && exit $$status

bench: $(STAMP)
	$(BIN)/python -m bench.with_servers --out bench/results/latest.json

# the peers, each in an environment of its own (arq pins redis<6, which kombu refuses);
# never dependencies of tickwork
PEERS := .venv-peers
ARQ := .venv-arq
CHART := .venv-chart

$(PEERS)/.installed:
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/pip install --quiet "celery[redis]==5.7.0" "rq==3.0.0" "dramatiq[redis]==2.2.1" "huey==3.5.4" "hiredis>=3"
	touch $@

$(CHART)/.installed:  # the charts of the peer benchmarks
	$(PYTHON) -m venv $(CHART)
	$(CHART)/bin/pip install --quiet "matplotlib>=3.8"
	touch $@

$(ARQ)/.installed:
	$(PYTHON) -m venv $(ARQ)
	$(ARQ)/bin/pip install --quiet "arq==0.28.0" "hiredis>=3"
	touch $@

bench-peers: $(STAMP) $(PEERS)/.installed $(ARQ)/.installed $(CHART)/.installed  # tickwork and 5 peers, interleaved (~25 min)
	$(BIN)/python -m bench.peers.run --out bench/results/peers.json
	$(CHART)/bin/python -m bench.peers.chart bench/results/peers.json docs/peers.png Redis

# the PostgreSQL peers, each in an environment of its own (both need Python 3.12)
OBAN := .venv-oban
PROCRASTINATE := .venv-procrastinate

$(OBAN)/.installed:
	$(PYTHON312) -m venv $(OBAN)
	$(OBAN)/bin/pip install --quiet "oban==0.7.0"
	touch $@

$(PROCRASTINATE)/.installed:
	$(PYTHON312) -m venv $(PROCRASTINATE)
	$(PROCRASTINATE)/bin/pip install --quiet "procrastinate==3.10.0" "psycopg[binary]>=3.2"
	touch $@

bench-peers-postgres: $(STAMP) $(OBAN)/.installed $(PROCRASTINATE)/.installed $(CHART)/.installed  # ~20 min
	$(BIN)/python -m bench.peers_pg.run --out bench/results/peers-postgres.json
	$(CHART)/bin/python -m bench.peers.chart bench/results/peers-postgres.json docs/peers-postgres.png PostgreSQL
	$(BIN)/python -m bench.postgres --out bench/results/postgres.json

clean:
	rm -rf $(VENV) $(DJANGO6) $(PEERS) $(ARQ) $(CHART) $(OBAN) $(PROCRASTINATE) .demo .pytest_cache .mypy_cache .ruff_cache
