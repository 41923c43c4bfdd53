"""Settings: default < config file < environment < flag, each declared once;
secrets never from a flag or the file; every bad value is a one-line error; a setting
of the file that a flag or the environment overrides is said; each command takes the
flags of the settings it reads, and refuses the others.

In process through prefork.config.load, and end to end through
`prefork-queue config` (which needs no database).
"""
import pytest
from cli_checks import assert_refused, closed_port
from conftest import run_cli

from prefork import config, settings
from prefork.cli.dispatch import every_command
from prefork.cli.parser import COMMAND_MODULES, SETTINGS_GROUP, build_parser, commands_of
from prefork.errors import UserError

PASSWORD = "pw-Do-Not-Echo-42"


def write_conf(tmp_path, text, name="prefork.ini"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


OVERRIDING = ", overriding the config file's "


def shown_settings(stdout):
    """`prefork-queue config` output -> {name: (value, source)}."""
    shown = {}
    for line in stdout.splitlines():
        name, rest = line.split(" = ", 1)
        value, source = rest.split("    # ", 1)
        shown[name] = (value.strip(), source.partition(OVERRIDING)[0])
    return shown


def overridden_settings(stdout):
    """`prefork-queue config` output -> {name: the config file's value it overrides}."""
    notes = [line.partition(OVERRIDING)[2] for line in stdout.splitlines()]
    return dict(note.split(" = ", 1) for note in notes if note)


# --- precedence ---------------------------------------------------------------------

CONF = """[prefork-queue]
poll_interval = 2.5
max_attempts = 7
retry_base = 3
queues = from_file
"""


def test_precedence_default_file_env_flag_in_process(tmp_path):
    path = write_conf(tmp_path, CONF)
    environ = {"PREFORK_QUEUE_MAX_ATTEMPTS": "8", "PREFORK_QUEUE_RETRY_BASE": "4",
               "PREFORK_QUEUE_QUEUES": "high, low"}
    loaded = config.load({"retry_base": "5", "lease_seconds": None}, path=path, environ=environ)
    expected = {"lease_seconds": (60.0, "default"), "poll_interval": (2.5, "file"),
                "max_attempts": (8, "env"), "queues": (["high", "low"], "env"),
                "retry_base": (5.0, "flag")}
    assert {name: (getattr(loaded, name), loaded.source(name)) for name in expected} == expected
    # Each layer alone wins over the ones below it.
    assert config.load({}, path=path, environ={}).max_attempts == 7
    assert config.load({}, environ={}).max_attempts == settings.BY_NAME["max_attempts"].default


def test_config_file_can_come_from_the_environment(tmp_path):
    path = write_conf(tmp_path, CONF)
    loaded = config.load({}, environ={"PREFORK_QUEUE_CONFIG": path})
    assert (loaded.poll_interval, loaded.source("poll_interval"), loaded.path) == (2.5, "file", path)
    other = write_conf(tmp_path, "[prefork-queue]\npoll_interval = 9\n", "other.ini")
    assert config.load({}, path=other, environ={"PREFORK_QUEUE_CONFIG": path}).poll_interval == 9


def test_precedence_end_to_end_through_the_config_command(tmp_path):
    path = write_conf(tmp_path, CONF)
    result = run_cli("config", "--config", path, "--retry-base", "5",
                     PREFORK_QUEUE_MAX_ATTEMPTS="8", PREFORK_QUEUE_RETRY_BASE="4")
    assert result.returncode == 0, result.stderr
    shown = shown_settings(result.stdout)
    assert shown["lease_seconds"] == ("60.0", "default")
    assert shown["poll_interval"] == ("2.5", "file")
    assert shown["queues"] == ("from_file", "file")
    assert shown["max_attempts"] == ("8", "env")
    assert shown["retry_base"] == ("5.0", "flag")
    assert set(shown) == {setting.name for setting in settings.SETTINGS}
    # Of the file's settings, the two the environment or a flag changes say so.
    assert overridden_settings(result.stdout) == {"max_attempts": "7", "retry_base": "3.0"}


def test_settings_flags_work_before_the_command_and_after_it_wins(tmp_path):
    path = write_conf(tmp_path, CONF)
    other = write_conf(tmp_path, "[prefork-queue]\nmax_attempts = 3\n", "other.ini")
    result = run_cli("--config", path, "--retry-base", "4", "--log-level=debug", "config",
                     "--retry-base", "5")
    assert result.returncode == 0, result.stderr
    shown = shown_settings(result.stdout)
    assert shown["poll_interval"] == ("2.5", "file")      # --config before the command
    assert shown["log_level"] == ("debug", "flag")         # --flag=value before it
    assert shown["retry_base"] == ("5.0", "flag")          # given on both sides: after wins
    both = shown_settings(run_cli("--config", path, "config", "--config", other).stdout)
    assert both["max_attempts"] == ("3", "file") and both["poll_interval"][1] == "default"


def test_the_settings_of_the_file_a_flag_or_the_environment_overrides(tmp_path):
    path = write_conf(tmp_path, CONF + "workers = 4\ndsn = mysql://file@db:3306/jobs\n")
    loaded = config.load({"retry_base": "5", "workers": "4", "dsn": "mysql://root:pw@db/jobs",
                          "lease_seconds": "30"}, path=path,
                         environ={"PREFORK_QUEUE_MAX_ATTEMPTS": "8",
                                  "PREFORK_QUEUE_POLL_INTERVAL": "2.5"})
    assert loaded.overridden() == [
        # the password in a DSN is masked, as `config` shows it
        config.Overridden("dsn", "mysql://file@db:3306/jobs", "mysql://root:********@db/jobs",
                          "flag"),
        config.Overridden("max_attempts", "7", "8", "env"),
        config.Overridden("retry_base", "3.0", "5.0", "flag")]
    # workers and poll_interval: the same value as the file's; lease_seconds: not in it
    assert config.load({"workers": "3"}, environ={}).overridden() == []
    # A value replaced after loading (as --django replaces the database) is no override.
    assert [row.setting for row in loaded.replace(max_attempts=9).overridden()] == \
        ["dsn", "retry_base"]


# --- the config file --------------------------------------------------------------------

@pytest.mark.parametrize("text,words", [
    ("[prefork-queue]\npol_interval = 2\n", ["unknown setting 'pol_interval'"]),
    ("[prefork-queue]\npoll_interval = 2\n[workers]\ncount = 3\n", ["unknown section [workers]"]),
    ("[prefork_queue]\npoll_interval = 2\n", ["unknown section [prefork_queue]"]),
    ("[DEFAULT]\npoll_interval = 2\n", ["unknown section [DEFAULT]"]),
    ("poll_interval = 2\n", ["not valid"]),
    ("[prefork-queue]\npoll_interval = 2\npoll_interval = 3\n", ["not valid"]),
    ("[prefork-queue]\nmax_attempts = 0\n", ["max_attempts", "at least 1"]),
    ("[prefork-queue]\nlog_level = loud\n", ["log_level", "one of"]),
])
def test_bad_config_file_is_a_one_line_error(tmp_path, text, words):
    path = write_conf(tmp_path, text)
    with pytest.raises(UserError) as refused:
        config.load({}, path=path, environ={})
    message = str(refused.value)
    assert "\n" not in message and path in message
    for word in words:
        assert word in message, message
    assert_refused(run_cli("config", "--config", path), *words)


def test_a_config_file_that_is_not_utf8_is_one_line_naming_the_byte_offset(tmp_path):
    path = tmp_path / "latin1.conf"
    path.write_bytes("[prefork-queue]\nworkers = 3\n# caf\u00e9\n".encode("latin-1"))
    result = run_cli("config", "--config", str(path))
    assert_refused(result, str(path), "not UTF-8", "byte offset 33")
    assert "caf" not in result.stderr


def test_missing_config_file_is_a_one_line_error(tmp_path):
    missing = str(tmp_path / "nope.ini")
    assert_refused(run_cli("config", "--config", missing), "cannot read config file",
                          "nope.ini")
    assert_refused(run_cli("config", PREFORK_QUEUE_CONFIG=missing), "nope.ini")


def test_an_empty_or_sectionless_file_means_defaults(tmp_path):
    path = write_conf(tmp_path, "# nothing set yet\n")
    loaded = config.load({}, path=path, environ={})
    assert all(loaded.source(setting.name) == "default" for setting in settings.SETTINGS)


# --- secrets ---------------------------------------------------------------------------------

def test_db_password_in_the_config_file_is_refused_without_echoing_it(tmp_path):
    path = write_conf(tmp_path, f"[prefork-queue]\ndb_password = {PASSWORD}\n")
    with pytest.raises(UserError, match="PREFORK_QUEUE_DB_PASSWORD"):
        config.load({}, path=path, environ={})
    result = run_cli("config", "--config", path)
    assert_refused(result, "db_password", "PREFORK_QUEUE_DB_PASSWORD")
    assert PASSWORD not in result.stderr


@pytest.mark.parametrize("args", [
    ["config", "--db-password", PASSWORD], ["config", f"--db-password={PASSWORD}"],
    ["--db-password", PASSWORD, "config"], [f"--db-password={PASSWORD}", "status"],
    ["--workers", "2", "--db-password", PASSWORD],
])
def test_there_is_no_db_password_flag(args):
    result = run_cli(*args)
    assert_refused(result, "--db-password", "PREFORK_QUEUE_DB_PASSWORD")
    assert PASSWORD not in result.stderr  # and, exit 2: not taken for --db-password-file


def test_no_secret_setting_is_a_flag_and_abbreviations_are_refused():
    secrets = [setting for setting in settings.SETTINGS if setting.secret]
    assert secrets and not any(setting.flag for setting in secrets)
    registered = every_command()
    parser = build_parser()
    commands = commands_of(parser)
    assert set(commands) == set(registered) and "run" in commands
    for sub in [parser, *commands.values()]:
        options = {option for action in sub._actions for option in action.option_strings}
        assert "--db-password" not in options and "--db-password-file" in options, sub.prog
    assert_refused(run_cli("config", "--db-pass", "x"), "unrecognized", "--db-pass")
    assert_refused(run_cli("--db-pass=x", "config"), "unrecognized", "--db-pass")


def test_password_comes_from_env_or_file_and_is_masked(tmp_path):
    password_file = tmp_path / "pw"
    password_file.write_text(PASSWORD + "\nsecond line ignored\n")
    password_file.chmod(0o600)
    from_file = config.load({"db_password_file": str(password_file)}, environ={})
    assert from_file.password() == PASSWORD
    from_env = config.load({"db_password_file": str(password_file)},
                           environ={"PREFORK_QUEUE_DB_PASSWORD": "env-wins"})
    assert from_env.password() == "env-wins"
    assert ("db_password", "********", "env") in from_env.describe()
    assert PASSWORD not in str(from_file.describe()) and "env-wins" not in str(from_env.describe())
    missing = config.load({"db_password_file": str(tmp_path / "none")}, environ={})
    with pytest.raises(UserError, match="cannot read db_password_file"):
        missing.password()


def test_a_password_file_that_is_not_utf8_is_refused_without_its_content(tmp_path):
    password_file = tmp_path / "pw"
    password_file.write_bytes(b"caf\xe9-" + PASSWORD.encode() + b"\n")
    password_file.chmod(0o600)
    with pytest.raises(UserError) as refused:
        config.load({"db_password_file": str(password_file)}, environ={}).password()
    assert "not UTF-8" in str(refused.value)
    assert "caf" not in str(refused.value) and "xe9" not in str(refused.value)


# --- invalid values ---------------------------------------------------------------------------

@pytest.mark.parametrize("args,env,words", [
    (["--poll-interval", "-1"], {}, ["--poll-interval", "poll_interval", "greater than 0"]),
    (["--poll-interval", "nan"], {}, ["poll_interval", "greater than 0"]),
    (["--max-attempts", "0"], {}, ["--max-attempts", "max_attempts", "at least 1"]),
    (["--max-attempts", "2.5"], {}, ["max_attempts"]),
    (["--retry-base", "0"], {}, ["retry_base"]),
    (["--lease-seconds", "inf"], {}, ["lease_seconds"]),
    (["--graceful-timeout", "inf"], {}, ["graceful_timeout", "finite"]),
    (["--soft-timeout", "inf"], {}, ["soft_timeout"]),
    (["--lease-seconds", "soon"], {}, ["lease_seconds"]),
    (["--log-format", "xml"], {}, ["log_format", "json"]),
    (["--max-payload-bytes", "-5"], {}, ["max_payload_bytes"]),
    (["--claim-batch", "65"], {}, ["claim_batch", "at most 64"]),
    (["--queues", "mail,default,mail"], {}, ["--queues", "'mail' more than once"]),
    (["--db-password-file-mode-check", "no"], {}, ["db_password_file_mode_check", "true or false"]),
    ([], {"PREFORK_QUEUE_MAX_ATTEMPTS": "abc"}, ["PREFORK_QUEUE_MAX_ATTEMPTS", "max_attempts"]),
    ([], {"PREFORK_QUEUE_POLL_INTERVAL": ""}, ["PREFORK_QUEUE_POLL_INTERVAL", "poll_interval"]),
    (["--no-such-setting", "1"], {}, ["unrecognized arguments", "--no-such-setting"]),
])
def test_invalid_values_are_one_line_errors(args, env, words):
    assert_refused(run_cli("config", *args, **env), *words)
    if "--no-such-setting" not in args:   # unknown, it cannot say whether "1" is its value
        assert_refused(run_cli(*args, "config", **env), *words)


def test_invalid_values_are_refused_before_the_database_is_touched(tmp_path):
    # No server at this DSN: the value error must come first, and alone.
    with closed_port() as port:
        nowhere = f"mysql://root@127.0.0.1:{port}/nowhere"
        after = run_cli("enqueue", "noop", "--max-attempts", "0", dsn=nowhere)
        before = run_cli("--max-attempts", "0", "enqueue", "noop", dsn=nowhere)
    for result in (after, before):
        assert_refused(result, "max_attempts")
        assert "connect" not in result.stderr


@pytest.mark.parametrize("args", [["config", "--reload"], ["--reload", "config"],
                                  ["config", "--reload", "--log-level", "info"]])
def test_a_true_false_flag_given_alone_means_true(args):
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert "reload = true    # flag" in result.stdout.splitlines()


def test_a_true_false_flag_keeps_a_word_that_is_not_a_command_as_its_value():
    assert_refused(run_cli("config", "--reload", "yes"), "reload", "true or false")


# --- which commands read which settings --------------------------------------------------

def settings_flags_of(command):
    """The flags listed under the command's settings group."""
    [group] = [group for group in command._action_groups if group.title == SETTINGS_GROUP]
    return {option for action in group._group_actions for option in action.option_strings}


def test_each_command_lists_and_takes_the_settings_it_reads():
    registered = every_command()
    assert list(registered) and set(registered) == set(COMMAND_MODULES)
    commands = commands_of(build_parser())
    for name, command in commands.items():
        reads = {setting.flag_name for setting in settings.SETTINGS
                 if setting.flag and setting.read_by_command(name)}
        assert settings_flags_of(command) == {"--config"} | reads, name
        assert {"--log-level", "--log-format", "--log-file"} <= reads, name   # every command
    every_flag = {setting.flag_name for setting in settings.SETTINGS if setting.flag}
    assert settings_flags_of(commands["config"]) == {"--config"} | every_flag
    dashboard_flags = {flag for flag in every_flag if flag.startswith("--dashboard-")}
    assert settings_flags_of(commands["run"]) == {"--config"} | every_flag - dashboard_flags


def test_every_command_named_as_a_reader_is_one():
    for setting in settings.SETTINGS:
        assert set(setting.readers) - {settings.EVERY_COMMAND} <= set(COMMAND_MODULES), \
            setting.name


def test_a_commands_help_shows_its_settings_and_config_help_shows_all():
    enqueue = run_cli("enqueue", "--help")
    assert enqueue.returncode == 0, enqueue.stderr
    for flag in ("--queue", "--key", "--dsn", "--max-attempts", "--app", "--log-level"):
        assert f"  {flag} " in enqueue.stdout, flag
    for flag in ("--workers", "--dashboard-bind", "--reload", "--supervisor-timeout"):
        assert flag not in enqueue.stdout, flag
    every = run_cli("config", "--help")
    assert every.returncode == 0, every.stderr
    for setting in settings.SETTINGS:
        assert (f"  {setting.flag_name} " in every.stdout) == setting.flag, setting.name


@pytest.mark.parametrize("args,words", [
    (["enqueue", "noop", "--workers", "3"], ["enqueue does not read --workers",
                                             "a setting of run"]),
    (["--workers", "3", "enqueue", "noop"], ["enqueue does not read --workers",
                                             "a setting of run"]),
    (["status", "--dashboard-bind=0.0.0.0:80"], ["status does not read --dashboard-bind",
                                                 "a setting of dashboard"]),
    (["grants", "--lease-seconds", "5"], ["grants does not read --lease-seconds",
                                          "every command that opens the database"]),
    (["--max-attempts", "3", "retry", "7"], ["--max-attempts means something else to retry",
                                             "after the command"]),
])
def test_a_flag_of_a_setting_the_command_does_not_read_is_refused(args, words):
    with closed_port() as port:   # refused before any connect: there is no server here
        assert_refused(run_cli(*args, dsn=f"mysql://root@127.0.0.1:{port}/jobs"), *words)
