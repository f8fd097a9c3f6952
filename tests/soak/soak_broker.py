"""The real broker as the soak campaigns run it: find the binary, start it, watch it, stop it.

Shared by ``crash_loop.py`` (the binary and a free port), ``disk_full.py``, ``fd_exhaustion.py``
and ``flood.py``. :class:`Broker` starts ``minikafka`` on ``127.0.0.1`` and a free port with
``--override`` settings, appends its output to one log file (a ``----- start (why) -----`` line
before each start, so readiness is judged on this start's output only) and waits, bounded, for
``listening on``. Reading ``/proc`` gives the figures the campaigns report: resident memory,
CPU seconds, descriptors. :func:`report` prints the figures and the verdict and gives the
exit status (0 pass, 1 a check failed).
"""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from built_binary import built_binary  # noqa: E402
START_LIMIT_S = 60
STOP_LIMIT_S = 30


class Failed(Exception):
    """A check failed (or the broker would not start or stop)."""


def binary():
    """The broker binary (tests/built_binary.py): $MINIKAFKA_BIN or the newest build."""
    return built_binary("minikafka", "MINIKAFKA_BIN") or sys.exit(
        "no minikafka binary: set MINIKAFKA_BIN or run `cargo build --bin minikafka`")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    """Resident memory (VmRSS) of a process, in KiB."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def peak_rss_kib(pid):
    """Peak resident memory (VmHWM) of a process, in KiB."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    """User plus system CPU seconds a process has used."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Broker:
    """One broker process at a time on a fixed port and data directory (restartable)."""

    def __init__(self, data_dir, log_path, overrides=(), preexec_fn=None):
        self.data_dir = data_dir
        self.log_path = pathlib.Path(log_path)
        self.port = free_port()
        self.overrides = list(overrides)
        self.preexec_fn = preexec_fn
        self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self):
        return self.proc.pid

    def start(self, why="start"):
        """Starts the broker and waits until it printed ``listening on``; raises Failed if not."""
        self.mark(why)
        # No schema registry: its default port 8081 is one per machine.
        args = [binary(), "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.data_dir}",
                "--override", "schema.registry.listeners="]
        for setting in self.overrides:
            args += ["--override", setting]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, preexec_fn=self.preexec_fn)
        began = time.monotonic()
        while "listening on" not in self.log_path.read_text(errors="replace").rsplit("----- start", 1)[-1]:
            if self.proc.poll() is not None:
                raise Failed(f"broker exited at start with {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() - began > START_LIMIT_S:
                raise Failed(f"broker not ready within {START_LIMIT_S} s:\n{self.tail()}")
            time.sleep(0.02)

    def start_for_setup(self):
        """Starts the broker as a campaign's setup: False (said why) when it does not start."""
        try:
            self.start()
            return True
        except Failed as e:
            print(f"setup: {e}")
            return False

    def mark(self, why):
        with open(self.log_path, "ab") as log:
            log.write(f"\n----- start ({why}) -----\n".encode())

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM and a bounded wait for a clean exit; raises Failed if it does not come."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_LIMIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise Failed(f"broker did not stop within {STOP_LIMIT_S} s of SIGTERM")

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()

    def tail(self, lines=30):
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def report(figures, failures, passed, log_path):
    """Prints the figures and the verdict; returns the exit status (0 pass, 1 fail)."""
    for k, v in figures.items():
        print(f"  {k}: {v}")
    if failures:
        print(f"FAIL: {'; '.join(failures)} (broker log {log_path})")
        return 1
    print(f"PASS: {passed}")
    return 0
