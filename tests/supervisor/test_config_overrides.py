"""Flags and the environment win over the config file, and a supervisor says so: each
setting of the file they override is logged (config_overridden, a warning) at start and
at each SIGHUP, and `prefork-queue config` shows it beside the value in force. A real
supervisor, its real config file edited, a real SIGHUP."""
import signal

from conftest import run_cli
from harness import supervisor_starter

APPS = ("--app", "ledger_app")
# The environment overrides the file's max_items from the start; the flag --workers 4
# overrides nothing until the file says otherwise.
FIRST = "[prefork-queue]\nmax_items = 100\n"
EDITED = "[prefork-queue]\nmax_items = 100\nworkers = 3\n"
ENV = {"PREFORK_QUEUE_MAX_ITEMS": "50"}


def overridden(sup, count):
    """The settings named by the supervisor's first `count` config_overridden events."""
    events = sup.wait_event("config_overridden", count=count)
    return {event["setting"]: (event["file_value"], event["value"], event["source"],
                               event["level"]) for event in events}


def test_a_setting_a_flag_overrides_is_logged_at_start_and_at_reload_and_shown(
        tmp_path, migrated):
    with supervisor_starter(tmp_path, migrated, *APPS) as start:
        sup = start("--workers", "4", config_text=FIRST, env=ENV)
        sup.wait_event("supervisor_started", timeout=30)
        assert overridden(sup, 1) == {"max_items": ("100", "50", "env", "warning")}
        [at_start] = sup.events("config_overridden")
        assert at_start["file"] == str(sup.config_path)

        sup.config_path.write_text(EDITED)
        sup.signal(signal.SIGHUP)
        sup.wait_event("config_reloaded", workers=4)
        assert overridden(sup, 3) == {"max_items": ("100", "50", "env", "warning"),
                                      "workers": ("3", "4", "flag", "warning")}
        assert len(sup.events("config_overridden", setting="workers")) == 1
        sup.wait_children(4, timeout=30)

    shown = run_cli("config", "--config", str(sup.config_path), "--workers", "4", **ENV)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "workers = 4    # flag, overriding the config file's workers = 3" in lines
    assert "max_items = 50    # env, overriding the config file's max_items = 100" in lines
    agreeing = run_cli("config", "--config", str(sup.config_path), "--workers", "3")
    assert "workers = 3    # flag" in agreeing.stdout.splitlines()   # the same value: no note
