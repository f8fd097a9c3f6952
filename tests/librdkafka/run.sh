#!/usr/bin/env bash
# librdkafka's own regression suite as minikafka's conformance test (docs/CONFORMANCE.md).
#
# Usage: tests/librdkafka/run.sh --ci | --all | --security [NNNN ...] | NNNN [NNNN ...]
#   --ci        a subset that fits in about six minutes on two cores, the build included (.ci/run)
#   --all       every test that talks to a broker, less the exclusions listed below with their reason
#   --security  the tests over SASL_SSL, SSL with client certificates (mTLS) and SASL_PLAINTEXT,
#               with a second runner built with OpenSSL and librdkafka's builtin SASL (PLAIN,
#               SCRAM) and certificates made at run time with openssl; not in CI (minutes).
#               Numbers after it run those tests over SASL_SSL only.
#   NNNN        the named tests only (exclusions do not apply: ask for one to see it fail)
#
# Builds librdkafka's test runner from the sources the rdkafka-sys crate vendors (Cargo's
# registry source cache; `cargo fetch` brings them when missing) in a copy under
# target/librdkafka-tests/<version>/, reused by later runs. Then, for each test, starts a fresh
# broker (ephemeral port on 127.0.0.1, temporary data directory, num.partitions=4) and runs
# that test alone against it (`TESTS=NNNN ./test-runner -L -K -E -Q -p1`, Kafka version
# 4.0.0.0) under its own time limit; a test whose broker died meanwhile fails. Prints one line
# per test and `N passed, N failed, N skipped`; exits non-zero when any test failed.
#
# The broker: MINIKAFKA_BIN (built with `cargo build --release --bin minikafka` when unset),
# or, with INTEROP_BROKER=kfake, the peer broker ($KFAKE_BIN, else
# ../shared/peers/kfake/kfake-runner beside the repository) so that a test's own mistake can be
# told from ours. Logs: $LIBRDKAFKA_TEST_OUT (default target/librdkafka-tests/out/), one
# NNNN.log (the runner) and NNNN.broker.log per test.
# TEST_TIMEOUT_S overrides each test's time limit (default 300 s; the --ci tests 120 s).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"

# --- Which tests -------------------------------------------------------------------------------

# Tests that need what this suite cannot give them, each with its reason. `--all` skips these;
# they still run when named on the command line. (Tests that find their own precondition
# missing, such as SASL, SSL or RapidJSON, skip themselves and are counted as skipped.)
declare -A EXCLUDED=(
    [0052]="needs Kafka's CLI scripts (kafka-topics.sh creates its topics) and no mk was found for the shims (MK_BIN)"
    [0077]="needs Kafka's CLI scripts (kafka-topics.sh creates its compacted topic) and no mk was found for the shims (MK_BIN)"
    [0109]="needs Kafka's CLI scripts (kafka-acls.sh) and no mk was found for the shims (MK_BIN)"
    [0115]="needs Kafka's CLI scripts (kafka-acls.sh) and no mk was found for the shims (MK_BIN)"
    [0119]="needs Kafka's CLI scripts (kafka-acls.sh) and no mk was found for the shims (MK_BIN)"
    [0103]="creates its topics with replication factor 3 (librdkafka's test clusters have three brokers; one broker answers INVALID_REPLICATION_FACTOR, as Kafka's does)"
)
# Kafka's CLI scripts, as far as librdkafka's tests use them, are shims over `mk` in
# kafka-cli/bin/ (KAFKA_PATH): with an mk (MK_BIN, else the one beside MINIKAFKA_BIN or the
# release build's), the tests that need them run.
CLI_TESTS=(0052 0077 0109 0115 0119)
mk_bin="${MK_BIN:-}"
if [ -z "$mk_bin" ]; then
    mk_bin="$(dirname "${MINIKAFKA_BIN:-$target/release/minikafka}")/mk"
fi
if [ -x "$mk_bin" ]; then
    for t in "${CLI_TESTS[@]}"; do unset "EXCLUDED[$t]"; done
else
    mk_bin=""
fi

# Tests that librdkafka's own test clusters (trivup) run with an authorizer letting everyone in
# unless an ACL says otherwise, as Kafka's StandardAuthorizer does with these settings: their
# minikafka starts the same way (0081 creates, lists and deletes ACLs).
declare -A WITH_AUTHORIZER=([0081]=1)
# Tests that deny `User:*` with ACLs and expect the client (User:ANONYMOUS) refused: the same
# authorizer without the super user.
declare -A WITH_OPEN_AUTHORIZER=([0109]=1 [0115]=1 [0119]=1)
AUTHORIZER_OVERRIDES=(
    --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
    --override allow.everyone.if.no.acl.found=true
    --override super.users=User:ANONYMOUS
)

# The --ci subset: the client's main paths (produce, consume, offsets, groups, admin, headers,
# compression, idempotence), each test taking seconds, not minutes.
CI_TESTS=(0001 0002 0003 0005 0007 0008 0011 0012 0013 0017 0019 0021 0031 0034 0035 0036
          0039 0041 0044 0048 0054 0057 0061 0063 0129)

# Every test of the runner's table (tests/test.c) that needs a broker (no TEST_F_LOCAL or
# TEST_F_MANUAL), by number, each with the reason the runner's flags give to leave it out:
# TEST_F_KNOWN_ISSUE (the runner's -K leaves it out) and TEST_F_SOCKEM (socket fault injection,
# left out by -E). A number with several entries is left out only when all of them are.
all_tests() {
    python3 - "$1/tests/test.c" <<'PY'
import re, sys
table = open(sys.argv[1]).read()
table = table[table.index("struct test tests[] = {"):]
reasons = {}
for m in re.finditer(r"_TEST\((\d{4})_\w+,\s*([^,)]*)", table):
    flags = {f.strip() for f in m.group(2).split("|")}
    if flags & {"TEST_F_LOCAL", "TEST_F_MANUAL"}:
        continue
    if "TEST_F_KNOWN_ISSUE" in flags:
        why = "marked TEST_F_KNOWN_ISSUE in the runner: a known issue (-K)"
    elif "TEST_F_SOCKEM" in flags:
        why = "injects socket faults with sockem (the runner's -E leaves these out)"
    else:
        why = ""
    reasons[m.group(1)] = why if reasons.get(m.group(1), why) else ""
for number in sorted(reasons):
    print(f"{number}|{reasons[number]}")
PY
}

# --security: the tests that skip themselves without TLS or SASL, and the --ci subset (the
# client's main paths) over SASL_SSL; a few over SSL with a client certificate the broker
# requires (mutual TLS) and over SASL_PLAINTEXT.
SECURITY_TESTS=(0097 0126 0135 0142)
SASL_SSL_TESTS=("${SECURITY_TESTS[@]}" "${CI_TESTS[@]}" 0030 0040 0056)
SSL_TESTS=(0001 0012 0019)
SASL_PLAINTEXT_TESTS=(0001 0135 0142)
# Run without quick mode: every sub-test of these is skipped in quick mode.
FULL_MODE_TESTS=(0142)
# Tests run once per listed sub-test (librdkafka's SUBTESTS substring, `;`-separated), leaving
# out a sub-test that one broker cannot serve, with the reason:
# 0142's "consumer message loss" sub-test creates its topic with replication factor 3 (one
# broker answers INVALID_REPLICATION_FACTOR, as Kafka's does, like 0103); the OAUTHBEARER ones
# skip themselves over PLAIN.
declare -A SUBTEST_RUNS=(
    [0142]="producer message loss;in the middle of a txn;reauth failure"
)
# Tests that fail over security for a reason that is not the broker's, each with the reason;
# --security leaves them out unless named (docs/CONFORMANCE.md has the details).
declare -A SECURITY_EXCLUDED=(
    [0097]="librdkafka classifies a failed TLS handshake as _SSL or _TRANSPORT depending on which of its own code paths (handshake or POLLOUT) sees it first; the test accepts only _SSL. Over SASL_SSL it fails where the client's own verify callback rejects the broker's certificate (the broker is not consulted); over SSL with a client certificate required, the broker's refusal of an untrusted one arrives after the client's side of a TLS 1.3 handshake (_TRANSPORT), and rustls's alert is certificate_required (116) where the test also insists on Java's bad_certificate (42)"
)

mode="${1:-}"
case "$mode" in
    --ci | --all | --security) ;;
    [0-9][0-9][0-9][0-9]) ;;
    *)
        echo "usage: $0 --ci | --all | --security [NNNN ...] | NNNN [NNNN ...]" >&2
        exit 2
        ;;
esac

# --- The runner, built once per librdkafka version ----------------------------------------------

version="$(awk '/^name = "rdkafka-sys"$/ { getline; gsub(/"/, "", $3); print $3 }' "$repo/Cargo.lock")"
if [ -z "$version" ]; then
    echo "run.sh: no rdkafka-sys in Cargo.lock" >&2
    exit 1
fi
source_dir() {
    ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"rdkafka-sys-$version/librdkafka" 2>/dev/null | head -1
}
src="$(source_dir)"
if [ -z "$src" ]; then
    (cd "$repo" && cargo fetch --locked >/dev/null)
    src="$(source_dir)"
fi
if [ -z "$src" ] || [ ! -f "$src/tests/test.c" ]; then
    echo "run.sh: librdkafka's sources for rdkafka-sys $version are not in Cargo's registry" >&2
    exit 1
fi

# Unoptimized: the compile takes a quarter of the time (the build dominates a --ci run), and
# what the tests check does not depend on the client's speed. Debug symbols stay, for gdb.
# --security builds a second runner beside the first, with OpenSSL (libssl-dev) and the
# builtin SASL mechanisms (PLAIN, SCRAM, OAUTHBEARER; GSSAPI and curl stay out).
if [ "$mode" = --security ]; then
    build="$target/librdkafka-tests/$version-security"
    configure_args=(--enable-ssl --disable-gssapi --disable-curl --disable-optimization)
    if ! pkg-config --exists libssl 2>/dev/null; then
        echo "run.sh: --security needs OpenSSL's headers: apt-get install libssl-dev pkg-config" >&2
        exit 1
    fi
else
    build="$target/librdkafka-tests/$version"
    configure_args=(--disable-ssl --disable-gssapi --disable-sasl --disable-curl --disable-optimization)
fi
if [ ! -f "$build/.built" ] || [ "$(cat "$build/.built")" != "${configure_args[*]}" ]; then
    echo "building librdkafka $version's test runner in $build (once)"
    rm -rf "$build"
    mkdir -p "$build"
    cp -a "$src/." "$build/"
    jobs="$(nproc 2>/dev/null || echo 2)"
    if ! (cd "$build" &&
          ./configure "${configure_args[@]}" &&
          make -j"$jobs" libs &&
          make -j"$jobs" -C tests build) >"$build/build.log" 2>&1; then
        tail -40 "$build/build.log" >&2
        echo "run.sh: the build failed; its log is $build/build.log" >&2
        exit 1
    fi
    echo "${configure_args[*]}" >"$build/.built"
fi

if [ "$mode" = --all ]; then
    selected=()
    excluded=0
    while IFS='|' read -r t flagged; do
        why="${EXCLUDED[$t]:-$flagged}"
        if [ -n "$why" ]; then
            echo "$t excluded: $why"
            excluded=$((excluded + 1))
        else
            selected+=("$t")
        fi
    done < <(all_tests "$build")
    echo "${#selected[@]} tests selected, $excluded excluded"
elif [ "$mode" = --ci ]; then
    selected=("${CI_TESTS[@]}")
elif [ "$mode" = --security ]; then
    shift
    # Each entry is PROTOCOL:NNNN.
    selected=()
    if [ $# -gt 0 ]; then
        for t in "$@"; do selected+=("SASL_SSL:$t"); done
    else
        for t in "${SASL_SSL_TESTS[@]}"; do
            if [ -n "${SECURITY_EXCLUDED[$t]:-}" ]; then
                echo "$t excluded over SASL_SSL: ${SECURITY_EXCLUDED[$t]}"
            else
                selected+=("SASL_SSL:$t")
            fi
        done
        for t in "${SSL_TESTS[@]}"; do selected+=("SSL:$t"); done
        for t in "${SASL_PLAINTEXT_TESTS[@]}"; do selected+=("SASL_PLAINTEXT:$t"); done
        echo "${#selected[@]} test runs selected, ${#SECURITY_EXCLUDED[@]} excluded"
    fi
else
    selected=("$@")
fi
default_limit=300
[ "$mode" = --ci ] && default_limit=120
limit="${TEST_TIMEOUT_S:-$default_limit}"

# --- The broker ---------------------------------------------------------------------------------

kind="${INTEROP_BROKER:-minikafka}"
case "$kind" in
    minikafka)
        if [ -z "${MINIKAFKA_BIN:-}" ]; then
            (cd "$repo" && cargo build --release --bin minikafka)
            MINIKAFKA_BIN="$target/release/minikafka"
        fi
        broker_bin="$MINIKAFKA_BIN"
        ready_marker="listening on"
        ;;
    kfake)
        broker_bin="${KFAKE_BIN:-$repo/../shared/peers/kfake/kfake-runner}"
        ready_marker="kfake-runner: pid"
        ;;
    *)
        echo "run.sh: INTEROP_BROKER=$kind: expected minikafka or kfake" >&2
        exit 2
        ;;
esac
if [ ! -x "$broker_bin" ]; then
    echo "run.sh: the $kind broker $broker_bin is not an executable" >&2
    exit 1
fi

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- Security (--security): certificates made once per run, the listeners, test.conf -----------

certs=""
# The client key's password (the key is encrypted, as librdkafka's test clusters make it).
KEY_PASSWORD=minikafka-test
SASL_USER=alice
SASL_PASSWORD=alice-secret
# Makes a CA, the broker's key and chain (for 127.0.0.1 and localhost) and a client key and
# certificate signed by the CA in $certs, in the forms 0097_ssl_verify loads (PEM, DER, PKCS#12).
make_certs() {
    certs="$(mktemp -d)"
    (
        cd "$certs"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout ca.key -out ca.crt \
            -subj "/CN=minikafka conformance CA"
        openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr -subj "/CN=localhost"
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >broker.ext
        openssl x509 -req -in broker.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
            -extfile broker.ext -out broker.crt
        cat broker.key broker.crt >broker.pem
        openssl req -newkey rsa:2048 -passout "pass:$KEY_PASSWORD" -keyout client.key \
            -out client.csr -subj "/O=minikafka/CN=$SASL_USER"
        printf 'extendedKeyUsage=clientAuth\n' >client.ext
        openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
            -extfile client.ext -out client.crt
        openssl x509 -in client.crt -outform der -out client.der
        openssl pkey -in client.key -passin "pass:$KEY_PASSWORD" -outform der -out client.key.der
        openssl x509 -in ca.crt -outform der -out ca.der
        openssl pkcs12 -export -in client.crt -inkey client.key -passin "pass:$KEY_PASSWORD" \
            -certfile ca.crt -out client.p12 -passout "pass:$KEY_PASSWORD"
    ) >"$out/certs.log" 2>&1 || {
        cat "$out/certs.log" >&2
        echo "run.sh: openssl could not make the test certificates" >&2
        exit 1
    }
}

# The broker's settings for the four listeners: TLS on SSL and SASL_SSL (a client certificate
# required on SSL only, as librdkafka's test clusters do), PLAIN users on both SASL listeners,
# and KIP-368 re-authentication every 10 s (0142 skips itself when the broker describes none).
security_overrides() {
    local plain="$1" ssl="$2" sasl_ssl="$3" sasl_plain="$4"
    printf '%s\n' \
        "listeners=PLAINTEXT://127.0.0.1:$plain,SSL://127.0.0.1:$ssl,SASL_SSL://127.0.0.1:$sasl_ssl,SASL_PLAINTEXT://127.0.0.1:$sasl_plain" \
        "ssl.keystore.type=PEM" \
        "ssl.keystore.location=$certs/broker.pem" \
        "listener.name.ssl.ssl.truststore.type=PEM" \
        "listener.name.ssl.ssl.truststore.location=$certs/ca.crt" \
        "listener.name.ssl.ssl.client.auth=required" \
        "connections.max.reauth.ms=10000" \
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER=\"$SASL_PASSWORD\";"
}

# test.conf's lines for a client of the listener speaking $1.
security_conf() {
    local proto="$1"
    echo "security.protocol=$proto"
    case "$proto" in
        SSL | SASL_SSL)
            printf '%s\n' "ssl.ca.location=$certs/ca.crt" \
                "ssl.certificate.location=$certs/client.crt" \
                "ssl.key.location=$certs/client.key" "ssl.key.password=$KEY_PASSWORD"
            ;;
    esac
    case "$proto" in
        SASL_*)
            printf '%s\n' "sasl.mechanism=PLAIN" "sasl.username=$SASL_USER" \
                "sasl.password=$SASL_PASSWORD"
            ;;
    esac
}

# The environment 0097_ssl_verify reads (trivup sets it for librdkafka's own clusters): the
# client's certificate and key in each encoding, the CAs, the key's password.
security_env() {
    printf '%s\n' "SSL_pkcs=$certs/client.p12" "SSL_pub_der=$certs/client.der" \
        "SSL_pub_pem=$certs/client.crt" "SSL_priv_der=$certs/client.key.der" \
        "SSL_priv_pem=$certs/client.key" "SSL_ca_der=$certs/ca.der" \
        "SSL_all_cas_pem=$certs/ca.crt" "SSL_password=$KEY_PASSWORD" "SSL_client_auth=required"
}

broker_pid=""
work=""
# Starts a broker for test $2 on a free port with a fresh data directory; sets broker_pid and
# port. With a protocol $3 (--security), it has the four listeners and port is $3's.
start_broker() {
    local log="$1" test="$2" proto="${3:-}"
    local extra=()
    [ -n "${WITH_AUTHORIZER[$test]:-}" ] && extra=("${AUTHORIZER_OVERRIDES[@]}")
    [ -n "${WITH_OPEN_AUTHORIZER[$test]:-}" ] && extra=("${AUTHORIZER_OVERRIDES[@]:0:4}")
    port="$(free_port)"
    local listener="listeners=PLAINTEXT://127.0.0.1:$port"
    if [ -n "$proto" ]; then
        local ssl sasl_ssl sasl_plain line
        ssl="$(free_port)" sasl_ssl="$(free_port)" sasl_plain="$(free_port)"
        while IFS= read -r line; do
            case "$line" in
                listeners=*) listener="$line" ;;
                *) extra+=(--override "$line") ;;
            esac
        done < <(security_overrides "$port" "$ssl" "$sasl_ssl" "$sasl_plain")
        case "$proto" in
            SSL) port="$ssl" ;;
            SASL_SSL) port="$sasl_ssl" ;;
            SASL_PLAINTEXT) port="$sasl_plain" ;;
        esac
    fi
    mkdir -p "$work/data"
    if [ "$kind" = minikafka ]; then
        "$broker_bin" --override "$listener" \
            --override "log.dirs=$work/data" --override num.partitions=4 \
            --override "schema.registry.listeners=" "${extra[@]}" \
            </dev/null >"$log" 2>&1 &
    else
        "$broker_bin" -port "$port" -data-dir "$work/data" -partitions 4 </dev/null >"$log" 2>&1 &
    fi
    broker_pid=$!
    for _ in $(seq 1 300); do
        if ! kill -0 "$broker_pid" 2>/dev/null; then
            echo "run.sh: the broker exited during startup:" >&2
            cat "$log" >&2
            return 1
        fi
        if grep -qs "$ready_marker" "$log" && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "run.sh: the broker was not ready within 30 s" >&2
    return 1
}

stop_broker() {
    [ -n "$broker_pid" ] || return 0
    kill -TERM "$broker_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$broker_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
    broker_pid=""
}

cleanup() {
    stop_broker
    if [ -n "$work" ]; then rm -rf "$work"; fi
    if [ -n "$certs" ]; then rm -rf "$certs"; fi
}
trap cleanup EXIT

out="${LIBRDKAFKA_TEST_OUT:-$target/librdkafka-tests/out}"
mkdir -p "$out"
echo "librdkafka $version test runner against $kind ($broker_bin); logs in $out"
if [ "$mode" = --security ]; then
    if [ "$kind" != minikafka ]; then
        echo "run.sh: --security starts minikafka's listeners; kfake has none" >&2
        exit 2
    fi
    make_certs
fi

# --- The tests ----------------------------------------------------------------------------------

passed=0
failed=0
skipped=0
failures=()
for entry in "${selected[@]}"; do
    # --security's entries are PROTOCOL:NNNN; the label names the logs and the report's lines.
    proto=""
    t="$entry"
    label="$t"
    if [[ "$entry" == *:* ]]; then
        proto="${entry%%:*}"
        t="${entry#*:}"
        label="$proto-$t"
    fi
    work="$(mktemp -d)"
    log="$out/$label.log"
    if ! start_broker "$out/$label.broker.log" "$t" "$proto"; then
        echo "$label FAILED (the broker did not start)"
        failed=$((failed + 1))
        failures+=("$label")
        rm -rf "$work"
        continue
    fi
    printf 'bootstrap.servers=127.0.0.1:%s\n' "$port" >"$work/test.conf"
    test_env=()
    if [ -n "$proto" ]; then
        security_conf "$proto" >>"$work/test.conf"
        mapfile -t test_env < <(security_env)
    fi
    # Quick mode (-Q) skips a test's sub-tests not marked quick; 0142 has only such sub-tests,
    # so in quick mode it would pass having checked nothing.
    quick_flag=(-Q)
    case " ${FULL_MODE_TESTS[*]} " in *" $t "*) quick_flag=() ;; esac
    # One runner per sub-test filter (librdkafka's SUBTESTS, a substring), or one unfiltered.
    subtest_filters=("")
    if [ -n "${SUBTEST_RUNS[$t]:-}" ]; then IFS=';' read -ra subtest_filters <<<"${SUBTEST_RUNS[$t]}"; fi
    started=$SECONDS
    : >"$log"
    code=0
    set +e
    for filter in "${subtest_filters[@]}"; do
        filter_env=()
        if [ -n "$filter" ]; then filter_env=("SUBTESTS=$filter"); fi
        # The outer redirection keeps the shell's own "Aborted" notice (a failed assertion) in the log.
        { (cd "$build/tests" &&
            LD_LIBRARY_PATH="$build/src:$build/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            RDKAFKA_TEST_CONF="$work/test.conf" TESTS="$t" TEST_KAFKA_VERSION=4.0.0.0 \
            KAFKA_PATH="$here/kafka-cli" BROKERS="127.0.0.1:$port" MK_BIN="$mk_bin" \
                env "${test_env[@]}" "${filter_env[@]}" timeout -k 10 "$limit" \
                ./test-runner -L -K -E "${quick_flag[@]}" -p1) >>"$log" 2>&1; } 2>>"$log"
        run_code=$?
        if [ "$code" -eq 0 ]; then code=$run_code; fi
    done
    set -e
    took=$((SECONDS - started))
    broker_alive=yes
    kill -0 "$broker_pid" 2>/dev/null || broker_alive=no
    stop_broker
    rm -rf "$work"
    # The runner's verdict per test: "Test NNNN_name PASSED|SKIPPED|FAILED".
    states="$(sed -n 's/.*=== Test \([0-9]\{4\}_[A-Za-z0-9_]*\) \(PASSED\|SKIPPED\|FAILED\) .*/\1:\2/p' "$log" | sort -u)"
    names="$(echo "$states" | cut -d: -f1 | grep -v '^$' | sort -u | tr '\n' ' ' || true)"
    names="${names:-(no verdict) }"
    # The first failed check, as the runner words it ("### Test ... failed at FILE:LINE ...").
    first_failure="$(grep -m1 -A1 '^.*### Test .* failed at' "$log" | tail -1 | tr -d '\033' | cut -c1-160 || true)"
    if [ "$broker_alive" = no ]; then
        verdict=FAILED
        why=" (the broker died: see $label.broker.log)"
    elif [ "$code" -eq 124 ] || [ "$code" -eq 137 ]; then
        verdict=FAILED
        why=" (timed out after $limit s)"
    elif [ "$code" -ne 0 ] || echo "$states" | grep -q ':FAILED'; then
        verdict=FAILED
        why=" (exit $code)"
    elif [ -z "$states" ]; then
        verdict=SKIPPED
        why=" (the runner selected no test)"
    elif ! echo "$states" | grep -q ':PASSED'; then
        verdict=SKIPPED
        why=""
    else
        verdict=PASSED
        why=""
    fi
    echo "$label $names$verdict in ${took}s$why"
    if [ "$verdict" = FAILED ] && [ -n "$first_failure" ]; then
        echo "     first failure: $first_failure"
    fi
    case "$verdict" in
        PASSED) passed=$((passed + 1)) ;;
        SKIPPED) skipped=$((skipped + 1)) ;;
        FAILED)
            failed=$((failed + 1))
            failures+=("$label")
            ;;
    esac
done
work=""

if [ ${#failures[@]} -gt 0 ]; then
    echo "failed: ${failures[*]} (logs in $out)"
fi
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$failed" -gt 0 ]; then
    exit 1
fi
# The CI subset is chosen to run against a broker with no security: each of its tests must
# pass, so a test that skips itself (or a runner that selected nothing) fails the step
# instead of passing having checked nothing.
if [ "$mode" = --ci ] && [ "$skipped" -gt 0 ]; then
    echo "--ci: $skipped test(s) of the subset skipped themselves; the subset expects every one to pass"
    exit 1
fi
exit 0
