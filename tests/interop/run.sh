#!/usr/bin/env bash
# Runs the Python/kcat interop suite against the minikafka binary (or, with
# INTEROP_BROKER=kfake, against the peer broker kfake: see conftest.py).
#
# Installs what is missing (kcat via apt; kafka-python, confluent-kafka, aiokafka, pytest and
# faust-streaming via pip; kafkajs via npm where node is installed), builds `minikafka` in release mode unless
# MINIKAFKA_BIN names a binary (or kfake is the broker under test), then runs pytest (the fixtures in conftest.py start and stop the
# broker). Extra arguments go to pytest. Exits non-zero when anything fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v kcat >/dev/null 2>&1; then
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y kcat
fi

python="${PYTHON:-python3}"
# confluent-kafka's extras bring the schema registry serializers (test_schema_registry.py);
# faust-streaming is the stream processor of test_frameworks.py.
if ! "$python" -c 'import kafka, confluent_kafka, aiokafka, pytest, faust
import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.json_schema
import confluent_kafka.schema_registry.protobuf' >/dev/null 2>&1; then
    "$python" -m pip install kafka-python 'confluent-kafka[avro,json,protobuf]' aiokafka pytest faust-streaming
fi

# kafkajs and @kafkajs/confluent-schema-registry for test_kafkajs.py (skipped where node is
# not installed), at the versions its package-lock.json pins.
if command -v npm >/dev/null 2>&1 && { [ ! -d "$here/kafkajs/node_modules/kafkajs" ] ||
    [ ! -d "$here/kafkajs/node_modules/@kafkajs/confluent-schema-registry" ]; }; then
    npm ci --prefix "$here/kafkajs" --no-audit --no-fund
fi

if [ "${INTEROP_BROKER:-minikafka}" != kfake ]; then
    if [ -z "${MINIKAFKA_BIN:-}" ]; then
        (cd "$repo" && cargo build --release --bin minikafka --bin mk)
        MINIKAFKA_BIN="${CARGO_TARGET_DIR:-$repo/target}/release/minikafka"
        export MK_BIN="${MK_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/mk}"
    fi
    if [ ! -x "$MINIKAFKA_BIN" ]; then
        echo "run.sh: MINIKAFKA_BIN=$MINIKAFKA_BIN is not an executable" >&2
        exit 1
    fi
    export MINIKAFKA_BIN
fi

cd "$here"
export PYTHONDONTWRITEBYTECODE=1
exec "$python" -m pytest -v -p no:cacheprovider "$@"
