"""mypy over the whole package, with setup.cfg's [mypy] configuration (strict on the
public API), as part of the test suite."""
import subprocess
import sys

from conftest import ROOT


def test_mypy_finds_no_error_in_the_package():
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "setup.cfg",
                             "--cache-dir", "/dev/null", "--no-color-output", "prefork"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"mypy failed:\n{result.stdout}{result.stderr}"
