# shardgate — `make run` starts local shards + the proxy; `make test` runs the suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
CONFIG ?= examples/local/cluster.yaml

.PHONY: run test lint bench sysdeps clean

# System packages the project needs, installed only when missing: MariaDB server + client
# (local shards, CLI tests), the MariaDB client headers (to build mysqlclient), Go's x/text
# collation tables (the unicode_loose_* vindexes use the same table as Vitess), for Spark
# the MariaDB JDBC driver and a Java runtime, and headless Chromium (the status page's browser test).
SYSPKGS_CHECK = \
	command -v mariadbd >/dev/null 2>&1 || need="$$need mariadb-server"; \
	command -v mariadb >/dev/null 2>&1 || need="$$need mariadb-client"; \
	pkg-config --exists libmariadb 2>/dev/null || need="$$need libmariadb-dev pkg-config"; \
	test -f /usr/share/gocode/src/golang.org/x/text/collate/tables.go || need="$$need golang-golang-x-text-dev"; \
	test -f /usr/share/java/mariadb-java-client.jar || need="$$need libmariadb-java"; \
	command -v java >/dev/null 2>&1 || need="$$need openjdk-17-jre-headless"; \
	test -x /usr/bin/chromium || need="$$need chromium"

sysdeps:
	@need=""; $(SYSPKGS_CHECK); \
	if [ -n "$$need" ]; then \
	  if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	    echo "shardgate needs these Debian packages:$$need (apt-get install$$need)" >&2; exit 1; fi; \
	  echo "installing:$$need" >&2; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null; fi

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory sysdeps
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip >/dev/null
	$(BIN)/pip install -q -e '.[test,spark]'
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

run: $(STAMP)
	$(BIN)/shardgate up -c $(CONFIG)

test: $(STAMP)
	$(BIN)/ruff check proxy rewriter vschema sqltext tests examples
	$(BIN)/mypy
	$(BIN)/pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python -m tests.benchmarks

lint: $(STAMP)
	$(BIN)/ruff check proxy rewriter vschema sqltext tests examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .shardgate
