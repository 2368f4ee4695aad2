# shardgate: the proxy (`shardgate serve`), or with MariaDB inside a local demo (`shardgate up`).
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      mariadb-server mariadb-client golang-golang-x-text-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY proxy ./proxy
COPY rewriter ./rewriter
COPY vschema ./vschema
COPY sqltext ./sqltext
COPY examples ./examples
# The hot modules compiled with mypyc in place (proxy/native_build.py), then installed with the
# package (its package-data takes the .so files); gcc and mypy only for that step. If the build
# fails the image is pure Python, as a checkout without `make` is.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev \
 && pip install --no-cache-dir 'mypy>=1.10' setuptools \
 && (python -m proxy.native_build || true) \
 && pip install --no-cache-dir . \
 && pip uninstall -y mypy \
 && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/* build

EXPOSE 15306
# Demo: local shards + proxy. For shards elsewhere: `shardgate serve -c /config/cluster.yaml`
# (then listen.host must be 0.0.0.0 and every user needs a password).
ENTRYPOINT ["shardgate"]
CMD ["up", "-c", "examples/local/cluster.yaml"]
