"""What a process loads before it does anything. `import prefork` loads no module of the
package but itself (each public name is imported on first use), and `prefork-queue
--version` none of the store, the drivers, the wake-ups or the commands. Real
interpreters, their sys.modules read as they exit; how long it takes is not asserted
(see the figures in the start-up paragraph of docs/explanation/architecture.md)."""
import json
import subprocess
import sys

from conftest import cli_env

# Loaded by what needs them, never by the package's import or the top level's --version.
HEAVY = ("pymysql", "sqlite3", "prefork.store.contract", "prefork.store.mysql",
         "prefork.wakeups", "prefork.client", "prefork.registry", "prefork.cli.jobs",
         "prefork.cli.supervise", "prefork.supervisor.loop", "importlib.metadata", "ctypes")
# The console script's own lines (setup.cfg's entry point), and sys.modules at the exit.
ENTRY_POINT = """import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["prefork-queue", *{args!r}]
from prefork.cli.main import main
sys.exit(main())
"""


def modules_after(code):
    """(the modules a fresh interpreter has loaded once `code` ran, its stdout)."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=cli_env(), timeout=60)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stderr.splitlines()[-1])), result.stdout


def loaded(modules, names):
    return sorted(module for module in modules for name in names
                  if module == name or module.startswith(name + "."))


def test_import_prefork_loads_no_other_module_of_the_package():
    modules, _ = modules_after("import json, sys; import prefork\n"
                               "print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    assert loaded(modules, ("prefork",)) == ["prefork"]
    assert loaded(modules, HEAVY) == []


def test_each_public_name_is_its_modules_object_once_used():
    code = ("import json, sys, prefork\n"
            "import prefork.client, prefork.errors, prefork.jobs, prefork.registry\n"
            "import prefork.cancellation\n"
            "names = {name: f'{getattr(prefork, name).__module__}.{name}' "
            "for name in prefork.__all__}\n"
            "print(json.dumps([names, prefork.__version__, sorted(dir(prefork))]))\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    _, stdout = modules_after(code)
    names, version, listed = json.loads(stdout)
    assert names == {name: f"prefork.{module}.{name}" for name, module in
                     [("handler", "registry"), ("enqueue", "client"), ("cancel", "client"),
                      ("notify", "client"), ("Client", "client"), ("Job", "jobs"),
                      ("CancelReport", "cancellation"), ("PermanentError", "errors"),
                      ("LeaseLost", "errors"), ("JobCancelled", "errors"),
                      ("on_success", "registry"), ("on_failure", "registry"),
                      ("on_dead", "registry"), ("JobAttempt", "worker.attempt"),
                      ("result", "client"), ("JobFailed", "errors"),
                      ("JobNotFinished", "errors"),
                      ("job", "workflows.spec"), ("chain", "workflows.spec"),
                      ("group", "workflows.spec"), ("enqueue_workflow", "workflows.api"),
                      ("open_batch", "workflows.api"), ("Batch", "workflows.api"),
                      ("workflow_progress", "workflows.api"), ("Enqueued", "workflows.model"),
                      ("Progress", "workflows.model"), ("Policy", "workflows.model"),
                      ("OnDead", "workflows.model")]}
    assert version.count(".") == 2 and set(names) <= set(listed)


def test_an_unknown_name_is_an_attribute_error():
    code = ("import json, sys, prefork\n"
            "try:\n    prefork.no_such_name\nexcept AttributeError as exc:\n    print(exc)\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    _, stdout = modules_after(code)
    assert stdout.strip() == "module 'prefork' has no attribute 'no_such_name'"


def test_version_loads_neither_the_store_nor_the_commands():
    modules, stdout = modules_after(ENTRY_POINT.format(args=["--version"]))
    assert stdout.split() == ["prefork-queue", subprocess.run(
        [sys.executable, "-c", "import prefork; print(prefork.__version__)"],
        capture_output=True, text=True, env=cli_env(), check=True).stdout.strip()]
    assert "importlib.metadata" in modules   # where the version comes from
    assert loaded(modules, [name for name in HEAVY if name != "importlib.metadata"]) == []


def test_a_command_loads_its_own_module_and_no_other_commands():
    modules, stdout = modules_after(ENTRY_POINT.format(args=["config"]))
    assert "dsn = sqlite:///prefork-queue.db    # default" in stdout.splitlines()
    commands = loaded(modules, ("prefork.cli",))
    assert "prefork.cli.setup" in commands
    assert not set(commands) & {"prefork.cli.jobs", "prefork.cli.supervise",
                                "prefork.cli.bench", "prefork.cli.doctor"}
    assert loaded(modules, ("pymysql", "prefork.store.contract", "prefork.wakeups",
                            "importlib.metadata")) == []
