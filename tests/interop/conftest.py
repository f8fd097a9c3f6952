"""Fixtures for the Python/kcat interop suite.

Contract:
- ``broker`` starts the broker under test on a free 127.0.0.1 port with a fresh data
  directory, waits (bounded) until it says it is listening and accepts a connection, and stops
  it with SIGTERM (SIGKILL after a bound) when the test ends. The broker's output is printed at
  teardown, so a failing test shows it.
- ``INTEROP_BROKER`` chooses the broker under test: ``minikafka`` (the default: the real
  ``minikafka`` binary, ``$MINIKAFKA_BIN``, else ``target/release/minikafka`` or
  ``target/debug/minikafka``) or ``kfake`` (the peer broker, ``$KFAKE_BIN``, else
  ``../shared/peers/kfake/kfake-runner`` beside the repository), so the same tests can be
  developed against a broker that already serves an API and then hold minikafka to it.
- ``broker_factory(**overrides)`` takes minikafka's ``key=value`` settings (``num_partitions``
  for ``num.partitions``; ``{port}`` in a value is the broker's port); for kfake they are translated (``num.partitions`` to
  ``-partitions``, ``flush.policy=fsync`` to ``-sync``) or passed as ``-config``.
- ``Broker.restart()`` stops the broker cleanly and ``Broker.crash_restart()`` kills it with
  SIGKILL (a crash: nothing flushed at exit); both start it again on the same port and data
  directory, so committed state must come back from disk.
- Markers: ``minikafka_only(reason)`` (the test reads minikafka's own internals) is skipped on
  other brokers, saying why; ``kfake_lacks(reason)`` (kfake is known not to do what the test
  checks) makes the test a strict xfail on kfake, so it still runs there and reports when
  kfake starts passing it, and an ordinary test on minikafka.
- Every test is bounded by an alarm (``TEST_LIMIT_S``) so nothing can hang the run.
"""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from built_binary import built_binary  # noqa: E402
START_LIMIT_S = 30
STOP_LIMIT_S = 20
TEST_LIMIT_S = 120

BROKER_KIND = os.environ.get("INTEROP_BROKER", "minikafka")
KINDS = ("minikafka", "kfake")
if BROKER_KIND not in KINDS:
    raise pytest.UsageError(f"INTEROP_BROKER={BROKER_KIND!r}: expected one of {KINDS}")

# minikafka settings with no kfake counterpart that only tune waiting (kfake has no delayed
# initial join, for one), so dropping them changes no test's meaning.
KFAKE_DROPPED = {"group.initial.rebalance.delay.ms"}


def _minikafka_binary():
    return built_binary("minikafka", "MINIKAFKA_BIN") or pytest.fail(
        "no minikafka binary: set MINIKAFKA_BIN or run `cargo build --bin minikafka`")


def _kfake_binary():
    default = REPO.parent / "shared" / "peers" / "kfake" / "kfake-runner"
    path = pathlib.Path(os.environ.get("KFAKE_BIN", default))
    if not path.exists():
        pytest.fail(f"no kfake runner at {path}: set KFAKE_BIN")
    return str(path)


# Every port `_free_port` handed out in this test session.
_GIVEN_PORTS = set()


def _free_port():
    """A port free on 127.0.0.1 now, and never one this session already handed out: the
    kernel may give a port again once its probe socket is closed, and two listeners of one
    broker (or two brokers) given the same port fail to start."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port
    raise RuntimeError("no port left that this session has not handed out")


def _minikafka_command(port, data_dir, overrides):
    # Two shards unless a test sets its own (a later override wins): the suite crosses shards
    # on every machine, whatever the default is there (one shard on two cores). No schema
    # registry unless a test asks (`schema_registry_listeners=...`): its default port 8081 is
    # one per machine, and suites run side by side.
    args = [
        _minikafka_binary(),
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override", f"log.dirs={data_dir}",
        "--override", "num.shards=2",
        "--override", "schema.registry.listeners=",
    ]
    for key, value in overrides.items():
        # `{port}` in a value is the broker's own port (a second listener names the first).
        args += ["--override", f"{key}={str(value).replace('{port}', str(port))}"]
    return args


def _kfake_command(port, data_dir, overrides):
    args = [_kfake_binary(), "-port", str(port), "-data-dir", str(data_dir)]
    for key, value in overrides.items():
        if key == "num.partitions":
            args += ["-partitions", str(value)]
        elif key == "flush.policy":
            # kfake has no timed flush: `-sync` is its fsync-every-batch, else the page cache.
            if value == "fsync":
                args.append("-sync")
        elif key == "message.max.bytes":
            args += ["-max-message-bytes", str(value)]
        elif key not in KFAKE_DROPPED:
            args += ["-config", f"{key}={value}"]
    return args


class Broker:
    """A running broker child process (``kind`` is ``minikafka`` or ``kfake``)."""

    # What each broker prints once its listener is bound.
    READY_MARKER = {"minikafka": "listening on", "kfake": "kfake-runner: pid"}

    def __init__(self, workdir, overrides, kind=BROKER_KIND):
        self.kind = kind
        self.port = _free_port()
        self.data_dir = workdir / "data"
        self.data_dir.mkdir()
        self.log_path = workdir / "broker.log"
        command = _minikafka_command if kind == "minikafka" else _kfake_command
        self._args = command(self.port, self.data_dir, overrides)
        self._log = open(self.log_path, "ab")
        # Clients a test keeps for this broker's lifetime (see group_clients.admin); dropped
        # before the broker stops, so none keeps reconnecting to a stopped broker.
        self.clients = {}
        self.proc = None
        self.start()

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def output(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self):
        """Starts the broker (again) on the same port and data directory."""
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self._log.write(f"----- starting {self.kind} -----\n".encode())
        self._log.flush()
        self._ready_from = self.log_path.stat().st_size
        self.proc = subprocess.Popen(
            self._args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + START_LIMIT_S
        marker = self.READY_MARKER[self.kind]
        while True:
            code = self.proc.poll()
            if code is not None:
                pytest.fail(f"broker exited during startup with {code}:\n{self.output()}")
            if marker in self.output()[self._ready_from:]:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"broker not ready within {START_LIMIT_S} s:\n{self.output()}")
            time.sleep(0.025)

    def stop(self):
        """SIGTERM, bounded wait; returns the exit code (SIGKILL and fail on timeout)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_LIMIT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                pytest.fail(f"broker ignored SIGTERM for {STOP_LIMIT_S} s")
        return self.proc.returncode

    def kill(self):
        """SIGKILL (kill -9), then reap the process."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self):
        """A clean stop (it must exit 0), then a start on the same port and data directory."""
        code = self.stop()
        assert code == 0, f"broker exited with {code} on SIGTERM:\n{self.output()}"
        self.start()

    def crash_restart(self):
        """kill -9, then a start on the same port and data directory."""
        self.kill()
        self._wait_port_closed()
        self.start()

    def _wait_port_closed(self):
        """Waits (bounded) until the killed broker's port refuses connections: its io_uring
        ring can keep the listening socket open briefly after the process is reaped, and a
        restart would then fail to bind."""
        deadline = time.monotonic() + STOP_LIMIT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            except OSError:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"port {self.port} still accepts connections {STOP_LIMIT_S} s after kill -9")
            time.sleep(0.025)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "minikafka_only(reason): reads minikafka's own internals; skipped on other brokers"
    )
    config.addinivalue_line(
        "markers", "kfake_lacks(reason): kfake is known to fail this check; a strict xfail on kfake"
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        marker = item.get_closest_marker("minikafka_only")
        if marker is not None and BROKER_KIND != "minikafka":
            why = marker.args[0] if marker.args else "reads minikafka internals"
            item.add_marker(pytest.mark.skip(reason=f"minikafka only ({why}); broker is {BROKER_KIND}"))
        marker = item.get_closest_marker("kfake_lacks")
        if marker is not None and BROKER_KIND == "kfake":
            item.add_marker(pytest.mark.xfail(reason=f"kfake lacks this: {marker.args[0]}", strict=True))


@pytest.fixture(autouse=True)
def _bounded_test():
    """Fails a test that runs longer than TEST_LIMIT_S instead of letting it hang."""

    def on_alarm(signum, frame):
        raise TimeoutError(f"test exceeded {TEST_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def broker_factory(tmp_path):
    """Starts brokers with extra ``key=value`` overrides; all are stopped at teardown."""
    started = []

    def start(**overrides):
        workdir = tmp_path / f"broker{len(started)}"
        workdir.mkdir()
        b = Broker(workdir, {k.replace("_", "."): v for k, v in overrides.items()})
        started.append(b)
        return b

    yield start
    for b in started:
        b.clients.clear()
        try:
            b.stop()
        finally:
            b.kill()
            b._log.close()
            print(f"----- {b.kind} output ({b.log_path}) -----\n{b.output()}")


@pytest.fixture
def broker(broker_factory):
    """A broker with default settings."""
    return broker_factory()
