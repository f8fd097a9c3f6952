"""Fixtures for the Python/kcat interop suite.

Contract:
- ``broker`` starts the real ``minikafka`` binary (``$MINIKAFKA_BIN``, else
  ``target/release/minikafka`` or ``target/debug/minikafka``) on a free 127.0.0.1 port with a
  fresh data directory, waits (bounded) until it prints ``listening on`` and accepts a
  connection, and stops it with SIGTERM (SIGKILL after a bound) when the test ends. The broker's
  output is printed at teardown, so a failing test shows it.
- Every test is bounded by an alarm (``TEST_LIMIT_S``) so nothing can hang the run.
"""

import os
import pathlib
import signal
import socket
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
START_LIMIT_S = 30
STOP_LIMIT_S = 20
TEST_LIMIT_S = 120


def _binary():
    path = os.environ.get("MINIKAFKA_BIN")
    if path:
        return path
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    for candidate in (target / "release" / "minikafka", target / "debug" / "minikafka"):
        if candidate.exists():
            return str(candidate)
    pytest.fail("no minikafka binary: set MINIKAFKA_BIN or run `cargo build --release --bin minikafka`")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """A running minikafka child process."""

    def __init__(self, workdir, overrides):
        self.port = _free_port()
        self.data_dir = workdir / "data"
        self.data_dir.mkdir()
        self.log_path = workdir / "broker.log"
        args = [
            _binary(),
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data_dir}",
        ]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        self._wait_ready()

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def output(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _wait_ready(self):
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            code = self.proc.poll()
            if code is not None:
                pytest.fail(f"broker exited during startup with {code}:\n{self.output()}")
            if "listening on" in self.output():
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
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


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
        try:
            b.stop()
        finally:
            b.kill()
            print(f"----- minikafka output ({b.log_path}) -----\n{b.output()}")


@pytest.fixture
def broker(broker_factory):
    """A broker with default settings."""
    return broker_factory()
