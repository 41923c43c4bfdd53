"""Running under systemd and supervisord: the shipped unit and program files, and
the notify protocol (READY, STATUS, WATCHDOG, STOPPING) spoken by the real
supervisor to a Unix datagram socket standing in for systemd."""
import configparser
import shutil
import signal
import socket
import subprocess
import time

from conftest import ROOT, wait_until
from harness import SupervisorProcess

from prefork.settings import BY_NAME

UNIT = ROOT / "conf" / "prefork-queue.service"
SUPERVISORD = ROOT / "conf" / "supervisord.conf"
GRACEFUL_DEFAULT = BY_NAME["graceful_timeout"].default
WATCHDOG_USEC = 200_000
APP = ("--app", "prefork.examples")


def read_ini(path):
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str   # systemd's keys are case-sensitive
    parser.read_string(path.read_text())
    return parser


def seconds(value):
    """A systemd or supervisord time span in seconds: "45", "45s", "1min"."""
    units = {"min": 60, "s": 1}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return float(value[:-len(suffix)]) * factor
    return float(value)


# -- the unit file ---------------------------------------------------------------------

def test_unit_is_hardened_and_speaks_notify():
    unit = read_ini(UNIT)
    service = unit["Service"]
    expected = {
        "Type": "notify", "NotifyAccess": "main", "User": "prefork", "Group": "prefork",
        "EnvironmentFile": "/etc/prefork-queue/env", "ProtectSystem": "strict",
        "ProtectHome": "yes", "NoNewPrivileges": "yes", "PrivateTmp": "yes", "UMask": "0077",
        "KillSignal": "SIGTERM", "Restart": "on-failure", "ExecReload": "/bin/kill -HUP $MAINPID",
        "ExecStart": "/usr/local/bin/prefork-queue --config /etc/prefork-queue/prefork-queue.conf",
    }
    assert {key: service.get(key) for key in expected} == expected
    assert set(service["RestrictAddressFamilies"].split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert seconds(service["TimeoutStopSec"]) > GRACEFUL_DEFAULT
    assert seconds(service["WatchdogSec"]) > 0
    assert service.get("KillMode") == "mixed"   # SIGTERM to the supervisor alone
    assert "PREFORK_QUEUE_DB_PASSWORD" not in "".join(service.values())
    assert "mode 0600" in UNIT.read_text()   # the EnvironmentFile's mode is documented
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def systemd_analyze_works(tmp_path):
    """systemd-analyze is installed and can verify a trivial unit in this container."""
    if shutil.which("systemd-analyze") is None:
        return False
    trivial = tmp_path / "trivial-check.service"
    trivial.write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    result = subprocess.run(["systemd-analyze", "verify", str(trivial)], capture_output=True,
                            text=True, timeout=60)
    return result.returncode == 0


def test_unit_passes_systemd_analyze_verify(tmp_path):
    """`systemd-analyze verify` where it runs; elsewhere the unit's sections and keys are
    checked against what systemd accepts for them."""
    text = UNIT.read_text()
    if not systemd_analyze_works(tmp_path):
        assert_unit_structure(read_ini(UNIT))
        return
    # verify insists that ExecStart's program exists: point it at this checkout's.
    installed = shutil.which("prefork-queue") or "/bin/true"
    copy = tmp_path / "prefork-queue.service"
    copy.write_text(text.replace("/usr/local/bin/prefork-queue", installed))
    result = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "prefork-queue.service" not in result.stderr, result.stderr   # no warning about us


def assert_unit_structure(unit):
    assert unit.sections() == ["Unit", "Service", "Install"]
    assert unit["Service"]["ExecStart"].startswith("/")   # systemd wants an absolute path
    for key, value in unit["Service"].items():
        assert value.strip() == value and value, key
    for key in ("NoNewPrivileges", "PrivateTmp", "ProtectHome"):
        assert unit["Service"][key] in ("yes", "true"), key


def test_supervisord_program_stops_gracefully_and_keeps_secrets_out():
    program = read_ini(SUPERVISORD)["program:prefork-queue"]
    assert program["command"].split()[:2] == ["/usr/local/bin/prefork-queue", "--config"]
    assert program["stopsignal"] == "TERM"
    assert float(program["stopwaitsecs"]) > GRACEFUL_DEFAULT
    assert program["killasgroup"] == "false" and program["stopasgroup"] == "false"
    assert program["user"] == "prefork"
    assert "environment" not in program   # the password comes from supervisord's environment
    assert "PASSWORD=" not in SUPERVISORD.read_text()


# -- the notify protocol, spoken by the real supervisor -----------------------------------

class FakeSystemd:
    """The receiving end of $NOTIFY_SOCKET: every datagram with the time it arrived."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.05)
        self.received = []   # (monotonic time, text)

    def collect(self):
        while True:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                return self.received
            self.received.append((time.monotonic(), data.decode()))

    def wait_for(self, predicate, message, timeout=15):
        return wait_until(lambda: [text for _, text in self.collect() if predicate(text)],
                          timeout=timeout, message=message)

    def pings_between(self, start, end):
        return [at for at, text in self.received if text == "WATCHDOG=1" and start <= at <= end]

    def close(self):
        self.sock.close()


def test_supervisor_speaks_the_notify_protocol(tmp_path, sqlite_migrated):
    systemd = FakeSystemd(tmp_path / "notify.sock")
    # No WATCHDOG_PID: it would have to be the supervisor's pid, known only after start.
    sup = SupervisorProcess(tmp_path, sqlite_migrated, *APP, "--workers", "2",
                            env={"NOTIFY_SOCKET": str(tmp_path / "notify.sock"),
                                 "WATCHDOG_USEC": str(WATCHDOG_USEC)})
    try:
        ready = systemd.wait_for(lambda text: text.startswith("READY=1"), "READY=1")
        assert ready[0] == f"READY=1\nMAINPID={sup.pid}"
        systemd.wait_for(lambda text: text.startswith("STATUS=")
                         and "master [default] workers 2/2" in text, "STATUS with the title")
        assert_watchdog_pings_at_half_the_period(systemd)
        sup.signal(signal.SIGTERM)
        systemd.wait_for(lambda text: text == "STOPPING=1", "STOPPING=1")
        assert sup.wait_exit() == 0
        texts = [text for _, text in systemd.collect()]
        assert texts.index("STOPPING=1") > texts.index(ready[0])
        assert any(text.startswith("STATUS=") and "draining" in text for text in texts)
    finally:
        sup.kill_all()
        systemd.close()


def assert_watchdog_pings_at_half_the_period(systemd):
    systemd.collect()
    start = time.monotonic()
    while time.monotonic() < start + 1.5:   # receive as they come: their times matter
        systemd.collect()
    pings = systemd.pings_between(start, start + 1.5)
    intervals = [later - earlier for earlier, later in zip(pings, pings[1:])]
    half_period = WATCHDOG_USEC / 2e6
    assert 10 <= len(pings) <= 20, systemd.received[:8]         # about one every 0.1 s
    assert max(intervals) < 2 * half_period, intervals          # never late enough to time out
    assert min(intervals) > half_period * 0.5, intervals        # and no flood
