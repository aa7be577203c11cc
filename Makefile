# The README's commands. Each target creates .venv and installs the project first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export DPFL_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: install bytecode up test test-fast lint bench bench-api plotly-bundle clean

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[test]"
	$(MAKE) --no-print-directory bytecode
	touch $(STAMP)

# An editable install leaves our sources uncompiled, and where PYTHONDONTWRITEBYTECODE is set (as
# on this project's machines) every process compiled them again: 0.8 s of `import dpfl.runner`
# (4.1 → 3.3 s). A source edited since is compiled in memory, as before.
bytecode:
	$(PY) -m compileall -q dpfl backend > /dev/null

install: $(STAMP)

up: install
	$(VENV)/bin/dpfl up --demo

# Three processes (pytest-xdist), on two cores too: most tests wait on workers, servers and the
# browser, not the CPU (7.5 min against 12 with two). The browser tests run in two groups, each in
# one of them with its own server and Chromium (tests/conftest.py).
test: install
	bash scripts/ensure-chromium.sh
	$(PY) -m pytest -q -n 3 --dist loadgroup --durations=25 $(PYTEST_ARGS)

# The inner loop: no browser, no services, nothing marked slow (about 3 minutes).
test-fast: install
	$(PY) -m pytest -q -m "not slow and not browser and not service" $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Every benchmark, each in its own process, then the summary at the top of docs/benchmarks.md.
# BENCH_ARGS passes options on, e.g. BENCH_ARGS="--only engine,ledger" or "--skip api".
bench: install
	bash scripts/ensure-chromium.sh
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[test,bench]"
	$(MAKE) --no-print-directory bytecode
	$(PY) -m benchmarks.all $(BENCH_ARGS)

# The API under load: needs PostgreSQL and Redis on 127.0.0.1 (.ci/services.sh starts them).
bench-api: install
	$(PY) benchmarks/api.py

# Rebuilds backend/vendor/plotly.min.js (committed, so nothing else needs Node): after changing the
# trace types in scripts/plotly-bundle/entry.js or the plotly.js version in its package.json.
plotly-bundle:
	cd scripts/plotly-bundle && npm ci --no-audit --no-fund && node build.js

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
