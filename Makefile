# The two entry points on a fresh machine: `make demo` and `make test`. Each installs what it
# needs first (scripts/bootstrap.sh: apt-get only if something is missing, a virtualenv, pip),
# idempotently and with caches.
VENV ?= .venv
BIN := $(VENV)/bin
export MIRRORLAKE_CACHE ?= $(HOME)/.cache/mirrorlake

.PHONY: setup demo test test-fast lint docs down clean image image-lakehouse image-test

setup:
	@VENV=$(VENV) scripts/bootstrap.sh

# a live system on local clusters (traffic, replication, lakehouse serve, dashboard) until `make down`
demo: setup
	$(BIN)/mirrorlake demo --live

# three workers: one takes every module of the Spark session and built lakehouse (started once,
# there only); each other module goes to whichever worker runs low (tests/conftest.py).
# A worker that crashes ends the run at once: a replaced worker left our scope scheduler waiting
# forever (CI of 2026-11-28, after librdkafka aborted a worker), and a crash is a bug to see.
test: setup
	$(BIN)/pytest -n 3 --dist loadgroup --max-worker-restart=0 -m "not image"

test-fast: setup
	$(BIN)/pytest -m "not kafka and not spark"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy replicator ingest lakehouse dashboards mirrorlake examples
	$(BIN)/lint-imports

# the generated documents (tests/test_config_reference.py and tests/test_docs.py fail until they are current)
docs: setup
	$(BIN)/python -c "from replicator.config.reference import write_reference; write_reference('docs/configuration-reference.md')"
	$(BIN)/python -c "from lakehouse.tables.reference import write_reference; write_reference('docs/lakehouse-reference.md')"

# the replicator's OCI image and the lakehouse's (Java, Spark's jars), built without a registry
# (podman, runc, mmdebstrap: apt-get if missing), and their test against the session's clusters (not
# in `make test`: the builds are minutes beyond CI's budget)
image: setup
	scripts/build_image.sh

image-lakehouse: setup
	scripts/build_image.sh lakehouse

image-test: image image-lakehouse
	$(BIN)/pytest -n0 -m image tests/test_image.py

down: setup
	$(BIN)/mirrorlake demo stop
	$(BIN)/mirrorlake clusters down

clean:
	rm -rf .mirrorlake .pytest_cache
