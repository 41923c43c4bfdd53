"""The settings registry drives the example config file; it must not drift."""
from pathlib import Path

from conftest import run_cli

from prefork.settings import SETTINGS

ROOT = Path(__file__).resolve().parent.parent


def test_example_config_file_is_generated_from_the_registry():
    result = run_cli("config", "--example")
    assert result.returncode == 0, result.stderr
    assert (ROOT / "conf" / "prefork-queue.conf").read_text() == result.stdout, \
        "conf/prefork-queue.conf is stale: run `prefork-queue config --example > conf/prefork-queue.conf`"
    for setting in SETTINGS:
        if not setting.secret:
            assert f"# {setting.name} = " in result.stdout


def test_readme_settings_table_is_generated_from_the_registry():
    result = run_cli("config", "--markdown")
    assert result.returncode == 0, result.stderr
    readme = (ROOT / "README.md").read_text()
    assert result.stdout in readme, \
        "README's settings table is stale: paste `prefork-queue config --markdown` into it"
    missing = [s.flag_name for s in SETTINGS if s.flag and s.flag_name not in readme]
    assert not missing, f"README does not mention {missing}"
