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
RUN pip install --no-cache-dir .

EXPOSE 15306
# Demo: local shards + proxy. For shards elsewhere: `shardgate serve -c /config/cluster.yaml`
# (then listen.host must be 0.0.0.0 and every user needs a password).
ENTRYPOINT ["shardgate"]
CMD ["up", "-c", "examples/local/cluster.yaml"]
