#!/usr/bin/env bash
# Runs kafka-python's and aiokafka's own test suites against minikafka as an external broker,
# and reports what passed (docs/CONFORMANCE.md, "Client libraries' own suites"). Not in CI
# (minutes to tens of minutes).
#
# Usage: tests/client-suites/run.sh [kafka-python|aiokafka ...] [-- PYTEST ARGS]
#
# - The suites come from the clients' own sources. kafka-python: KAFKA_PYTHON_SRC, a checkout
#   (its own `kafka` package runs with its own tests), else the installed version's source
#   distribution (`pip download --no-binary`; 3.0.12's lacks the harness test/integration
#   imports, so a checkout is needed). aiokafka's sdist has no tests: they come from
#   AIOKAFKA_SRC (a checkout at the installed version's tag) or, when GitHub is reachable, the
#   tag's source archive. Kept in target/client-suites/.
# - Test dependencies (pytest-mock, pytest-timeout, pytest-asyncio, and the codecs: cramjam,
#   python-snappy, lz4, zstandard) go into a virtual
#   environment there (target/client-suites/venv, seeing the system's packages).
# - The broker: MINIKAFKA_BIN (a release build when unset), one per suite, on a fresh data
#   directory with PLAINTEXT, SSL (client certificate required), SASL_PLAINTEXT and SASL_SSL
#   listeners, the PLAIN users aiokafka's test image has (admin, test, test2), certificates
#   made with openssl in the layout aiokafka's tests read, and the settings of each suite's own
#   test broker (KAFKA_PYTHON_SETTINGS, AIOKAFKA_SETTINGS below).
# - kafka-python: `KAFKA_VERSION="$kafka_version" KAFKA_URI=PLAINTEXT://127.0.0.1:PORT pytest test/integration`
#   (its fixtures take an external broker that way).
# - aiokafka: its fixtures start a docker container; a conftest appended to a copy of its
#   tests replaces them with the external broker. What the container alone can do (Kafka's
#   CLI for ACLs and SCRAM users, a Kerberos KDC) is a stub whose use skips the test. Its
#   configuration turns warnings into errors; the deprecations of newer pytest and
#   pytest-asyncio than its CI pins are ignored (-W, -o asyncio_default_fixture_loop_scope).
# - Logs and JUnit XML in target/client-suites/out/. Exits non-zero when a suite has failures.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
base="$target/client-suites"
out="$base/out"
mkdir -p "$base" "$out"

suites=()
pytest_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        kafka-python | aiokafka) suites+=("$1") ;;
        --) shift; pytest_args=("$@"); break ;;
        *) echo "usage: $0 [kafka-python|aiokafka ...] [-- PYTEST ARGS]" >&2; exit 2 ;;
    esac
    shift
done
[ ${#suites[@]} -gt 0 ] || suites=(kafka-python aiokafka)

# --- Python environment -------------------------------------------------------------------------

python="${PYTHON:-python3}"
venv="$base/venv"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv --system-site-packages "$venv"
fi
py="$venv/bin/python"
if ! "$py" -c 'import kafka, aiokafka, pytest, pytest_mock, pytest_timeout, pytest_asyncio, cramjam, snappy, lz4, zstandard' 2>/dev/null; then
    "$py" -m pip install -q kafka-python aiokafka pytest pytest-mock pytest-timeout pytest-asyncio cramjam python-snappy lz4 zstandard
fi
version_of() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))"; }

# --- The broker ---------------------------------------------------------------------------------

if [ -z "${MINIKAFKA_BIN:-}" ]; then
    (cd "$repo" && cargo build --release --bin minikafka)
    MINIKAFKA_BIN="$target/release/minikafka"
fi

free_port() {
    "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

certs="$(mktemp -d)"
work=""
broker_pid=""
cleanup() {
    if [ -n "$broker_pid" ]; then
        kill -TERM "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
    fi
    rm -rf "$certs"
    if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# aiokafka's layout: ca.crt, client.crt, client.key (encrypted with "abcdefgh").
(
    cd "$certs"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout ca.key -out ca.crt -subj "/CN=client-suites CA"
    openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr -subj "/CN=localhost"
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >broker.ext
    openssl x509 -req -in broker.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile broker.ext -out broker.crt
    cat broker.key broker.crt >broker.pem
    openssl req -newkey rsa:2048 -passout pass:abcdefgh -keyout client.key -out client.csr -subj "/CN=client"
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile client.ext -out client.crt
) >"$out/certs.log" 2>&1

# The settings each suite's own test broker runs with, where they matter to a single node.
# kafka-python: its servers/resources/default/kafka.properties (and fixtures.py's ACL config).
KAFKA_PYTHON_SETTINGS=(
    num.partitions=4 group.min.session.timeout.ms=1000 group.initial.rebalance.delay.ms=0
    authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
    allow.everyone.if.no.acl.found=true
)
# aiokafka: its docker image's start-kafka.sh, over Kafka's shipped config/server.properties
# (which sets group.initial.rebalance.delay.ms=0).
AIOKAFKA_SETTINGS=(
    num.partitions=2 group.initial.rebalance.delay.ms=0 auto.create.topics.enable=true
    authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
    allow.everyone.if.no.acl.found=true super.users=User:admin
)

# Starts a broker on fresh ports with the settings $2...; sets broker_pid, port, ssl_port,
# sasl_plain_port, sasl_ssl_port.
start_broker() {
    local log="$1"
    shift
    local settings=()
    for setting in "$@"; do settings+=(--override "$setting"); done
    port="$(free_port)" ssl_port="$(free_port)" sasl_plain_port="$(free_port)" sasl_ssl_port="$(free_port)"
    work="$(mktemp -d)"
    "$MINIKAFKA_BIN" \
        --override "listeners=PLAINTEXT://127.0.0.1:$port,SSL://127.0.0.1:$ssl_port,SASL_PLAINTEXT://127.0.0.1:$sasl_plain_port,SASL_SSL://127.0.0.1:$sasl_ssl_port" \
        --override "log.dirs=$work" "${settings[@]}" \
        --override "schema.registry.listeners=" \
        --override ssl.keystore.type=PEM --override "ssl.keystore.location=$certs/broker.pem" \
        --override listener.name.ssl.ssl.truststore.type=PEM \
        --override "listener.name.ssl.ssl.truststore.location=$certs/ca.crt" \
        --override listener.name.ssl.ssl.client.auth=required \
        --override 'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin" user_test="test" user_test2="test2";' \
        </dev/null >"$log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 1 300); do
        if ! kill -0 "$broker_pid" 2>/dev/null; then
            cat "$log" >&2
            echo "run.sh: the broker exited during startup" >&2
            exit 1
        fi
        if grep -qs "listening on" "$log" && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "run.sh: the broker was not ready within 30 s" >&2
    exit 1
}

stop_broker() {
    kill -TERM "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
    broker_pid=""
    rm -rf "$work"
    work=""
}

# The sources: kafka-python's sdist; aiokafka's tests from AIOKAFKA_SRC or its tag's archive.
fetch_sdist() {
    local name="$1" version="$2" dir="$base/src"
    mkdir -p "$dir"
    local tarball
    tarball="$(ls "$dir"/"${name//-/_}"-"$version".tar.gz 2>/dev/null | head -1 || true)"
    if [ -z "$tarball" ]; then
        "$py" -m pip download -q --no-binary "$name" --no-deps "$name==$version" -d "$dir" >&2
        tarball="$(ls "$dir"/"${name//-/_}"-"$version".tar.gz | head -1)"
    fi
    tar -xzf "$tarball" -C "$dir"
    echo "$dir/${name//-/_}-$version"
}

status=0
summary=()
# pytest's closing line ("N failed, N passed, ... in Ns").
last_count() {
    grep -E '^=+ .*(passed|failed|skipped|error).* in [0-9.]+s' "$1" | tail -1 | tr -d '=' || true
}

run_kafka_python() {
    local version src pythonpath=""
    if [ -n "${KAFKA_PYTHON_SRC:-}" ]; then
        # A checkout: its own client with its own tests.
        src="$base/src/kafka-python-checkout"
        rm -rf "$src"
        mkdir -p "$src"
        cp -a "$KAFKA_PYTHON_SRC/kafka" "$KAFKA_PYTHON_SRC/test" "$KAFKA_PYTHON_SRC/pyproject.toml" "$src/"
        pythonpath="$src"
        version="$(cd "$src" && "$py" -c 'import kafka; print(kafka.__version__)') (checkout)"
    else
        version="$(version_of kafka-python)"
        src="$(fetch_sdist kafka-python "$version")"
        if [ ! -f "$src/test/service.py" ]; then
            # kafka-python 3.0's sdist ships test/integration without the harness it imports
            # (test/__init__.py, test/service.py).
            echo "kafka-python $version: its sdist lacks test/service.py; set KAFKA_PYTHON_SRC to a checkout" >&2
            summary+=("kafka-python $version: not run (incomplete sdist: set KAFKA_PYTHON_SRC)")
            status=1
            return
        fi
    fi
    # The Kafka version whose API set the broker advertises (kafka-python infers it from
    # ApiVersions; test_kafka_version_infer checks that it matches KAFKA_VERSION).
    local kafka_version="${KAFKA_PYTHON_KAFKA_VERSION:-4.1.0}"
    # The Kafka version whose API set the broker advertises (kafka-python infers it from
    # ApiVersions; test_kafka_version_infer checks that it matches KAFKA_VERSION).
    local kafka_version="${KAFKA_PYTHON_KAFKA_VERSION:-4.1.0}"
    start_broker "$out/kafka-python.broker.log" "${KAFKA_PYTHON_SETTINGS[@]}"
    echo "kafka-python $version's test/integration against minikafka on 127.0.0.1:$port"
    # Its fixtures insist on a Kafka distribution folder even for an external broker; an
    # empty one does (nothing in it is run).
    mkdir -p "$base/no-kafka-distribution"
    set +e
    (cd "$src" && KAFKA_ROOT="$base/no-kafka-distribution" PYTHONPATH="$pythonpath" KAFKA_VERSION="$kafka_version" KAFKA_URI="PLAINTEXT://127.0.0.1:$port" \
        "$py" -m pytest -p no:cacheprovider -o addopts= -o log_level=WARNING --timeout 300 -rfEs \
        --ignore=test/integration/test_ssl_integration.py \
        --junitxml="$out/kafka-python.xml" test/integration "${pytest_args[@]}") \
        >"$out/kafka-python.log" 2>&1
    local code=$?
    set -e
    stop_broker
    summary+=("kafka-python $version: $(last_count "$out/kafka-python.log")")
    grep -E '^(FAILED|ERROR) ' "$out/kafka-python.log" || true
    [ "$code" -eq 0 ] || status=1
}

run_aiokafka() {
    local version dir="$base/src/aiokafka-tests"
    version="$(version_of aiokafka)"
    rm -rf "$dir"
    mkdir -p "$dir"
    if [ -n "${AIOKAFKA_SRC:-}" ]; then
        cp -a "$AIOKAFKA_SRC/tests" "$dir/tests"
        cp "$AIOKAFKA_SRC/pyproject.toml" "$dir/"
    elif curl -fsSL "https://github.com/aio-libs/aiokafka/archive/refs/tags/v$version.tar.gz" \
        -o "$base/src/aiokafka-$version-github.tar.gz" 2>/dev/null; then
        tar -xzf "$base/src/aiokafka-$version-github.tar.gz" -C "$dir" --strip-components=1 \
            "aiokafka-$version/tests" "aiokafka-$version/pyproject.toml"
    else
        echo "aiokafka: its tests are not in its sdist; set AIOKAFKA_SRC to a checkout of v$version" >&2
        summary+=("aiokafka $version: not run (no tests: set AIOKAFKA_SRC)")
        status=1
        return
    fi
    # The external broker in place of the docker fixtures (later definitions win).
    cat "$here/aiokafka_external_broker.py" >>"$dir/tests/conftest.py"
    mkdir -p "$dir/tests/ssl_cert"
    cp "$certs/ca.crt" "$certs/client.crt" "$certs/client.key" "$dir/tests/ssl_cert/"
    start_broker "$out/aiokafka.broker.log" "${AIOKAFKA_SETTINGS[@]}"
    echo "aiokafka $version's tests against minikafka on 127.0.0.1:$port"
    set +e
    (cd "$dir" && MINIKAFKA_PORTS="$port,$ssl_port,$sasl_plain_port,$sasl_ssl_port" \
        "$py" -m pytest -p no:cacheprovider --timeout 300 -rfE -W ignore::ResourceWarning \
        -o asyncio_default_fixture_loop_scope=function -W ignore::pytest.PytestRemovedIn10Warning \
        --docker-image "minikafka:4.0.0" --junitxml="$out/aiokafka.xml" tests "${pytest_args[@]}") \
        >"$out/aiokafka.log" 2>&1
    local code=$?
    set -e
    stop_broker
    summary+=("aiokafka $version: $(last_count "$out/aiokafka.log")")
    grep -E '^(FAILED|ERROR) ' "$out/aiokafka.log" || true
    [ "$code" -eq 0 ] || status=1
}

for suite in "${suites[@]}"; do
    case "$suite" in
        kafka-python) run_kafka_python ;;
        aiokafka) run_aiokafka ;;
    esac
done
printf '%s\n' "${summary[@]}"
echo "logs in $out"
exit "$status"
