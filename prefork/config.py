"""The effective configuration: the settings (prefork.settings) read from the config
file, the environment and the flags.

Precedence, lowest to highest: default, config file, environment
(`PREFORK_QUEUE_<NAME>`), command-line flag. Secrets are never read from a
flag and never printed unmasked.
"""
import configparser
import os
import stat
from typing import Any, Mapping, NamedTuple, Optional
from urllib.parse import unquote, urlsplit, urlunsplit

from .errors import UserError
from .settings import (BY_NAME, ENV_PREFIX, FILE_SECTION, MASK, NAMED_SECTION_KINDS, SETTINGS,
                       Sections, Setting, shown)


class Overridden(NamedTuple):
    """A setting of the config file that the environment or a flag overrides: both
    values as `prefork-queue config` shows them (secrets masked), and the winner's source."""
    setting: str
    file_value: str
    value: str
    source: str   # "env" or "flag"


class Config:
    """The effective settings: attribute access, plus where each value came from."""

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str],
                 path: Optional[str] = None, sections: Optional[Sections] = None,
                 from_file: Optional[Mapping[str, Any]] = None) -> None:
        self._values = dict(values)
        self._sources = dict(sources)
        self.path = path
        self.sections: Sections = sections or {}   # see NAMED_SECTION_KINDS
        self._from_file = dict(from_file or {})   # {name: value} the config file sets

    def named(self, kind: str) -> dict[str, dict[str, str]]:
        """{name: {key: raw text}} of the [kind:name] sections of the config file."""
        return {name: keys for (section_kind, name), keys in self.sections.items()
                if section_kind == kind}

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def source(self, name: str) -> str:
        return self._sources[name]

    def replace(self, **changes: Any) -> "Config":
        values = dict(self._values, **changes)
        sources = dict(self._sources, **{name: "override" for name in changes})
        return Config(values, sources, self.path, self.sections, self._from_file)

    def describe(self) -> list[tuple[str, str, str]]:
        """(name, shown value, source) rows with secrets masked, for `prefork-queue config`."""
        return [(setting.name, _masked(setting, self._values[setting.name]),
                 self._sources[setting.name]) for setting in SETTINGS]

    def overridden(self) -> list[Overridden]:
        """The settings of the config file whose value the environment or a flag replaces
        with another (a flag that repeats the file's value overrides nothing)."""
        return [Overridden(setting.name, _masked(setting, self._from_file[setting.name]),
                           _masked(setting, self._values[setting.name]),
                           self._sources[setting.name])
                for setting in SETTINGS if setting.name in self._from_file
                and self._sources[setting.name] in ("env", "flag")
                and self._from_file[setting.name] != self._values[setting.name]]

    def password(self) -> Optional[str]:
        """The database password from the environment or the password file, or None."""
        if self.db_password:
            return str(self.db_password)
        if self.db_password_file:
            return read_password_file(self.db_password_file, "db_password_file",
                                      self.db_password_file_mode_check)
        return None


def _masked(setting: Setting, value: Any) -> str:
    """A setting's value as `prefork-queue config` shows it: secrets masked, and a
    password in the DSN."""
    if setting.secret and value:
        return MASK
    if setting.name == "dsn" and value:
        return masked_dsn(value)
    return shown(value)


def read_password_file(path: str, setting: str, check_mode: bool = True) -> str:
    """The first line of the password file that `setting` names (db_password_file,
    dashboard_password_file); with check_mode, refused when others may read it."""
    try:
        with open(path, encoding="utf-8") as handle:
            if check_mode:
                _check_private(path, os.fstat(handle.fileno()).st_mode, setting)
            return handle.readline().rstrip("\r\n")
    except OSError as exc:
        raise UserError(f"cannot read {setting} {path!r}: {exc.strerror}") from None
    except UnicodeDecodeError:   # its message would show the password's bytes
        raise UserError(f"{setting} {path!r} is not UTF-8") from None


def _check_private(path: str, mode: int, setting: str) -> None:
    """Refuse a password file others could read, or could have written: checked on the
    mode bits, since reading them as root would succeed whatever they say."""
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UserError(f"{setting} {path!r} is accessible to its group or others "
                        f"(mode {stat.S_IMODE(mode):04o}): chmod 600 it, or set "
                        f"db_password_file_mode_check = false")


def masked_dsn(dsn: str) -> str:
    """The DSN with any password in it masked: given after a ':' in the user part,
    or hidden in an encoded user name (`root%3Asecret`), which shows as MASK whole."""
    try:
        parts = urlsplit(dsn)
    except ValueError:   # malformed (e.g. an unclosed "["): shown not at all
        return MASK
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at:
        return dsn
    user, colon, _ = userinfo.partition(":")
    if ":" in unquote(user):
        user = MASK
    shown_userinfo = f"{user}:{MASK}" if colon else user
    return urlunsplit(parts._replace(netloc=f"{shown_userinfo}@{hostport}"))


def _parse(setting: Setting, raw: str, where: str) -> Any:
    try:
        return setting.parse(raw)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: invalid value for {setting.name}: {exc}") from None


def read_file(path: str) -> tuple[dict[str, str], Sections]:
    """(settings, named sections) from the config file: the raw key/value pairs of
    its [prefork-queue] section, and {(kind, name): {key: value}} of the others.

    Unknown keys and unknown sections are errors: a typo must not silently
    fall back to a default.
    """
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, "rb") as handle:
            # Decoded whole, so that an error's offset is the file's, not a chunk's.
            parser.read_string(handle.read().decode("utf-8"), source=path)
    except OSError as exc:
        raise UserError(f"cannot read config file {path!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"config file {path!r} is not UTF-8: byte offset {exc.start}") from None
    except configparser.Error as exc:
        first_line = str(exc).splitlines()[0]
        raise UserError(f"config file {path!r} is not valid: {first_line}") from None
    named: Sections = {}
    unknown_sections: list[str] = []
    for section in parser.sections():
        kind, _, name = section.partition(":")
        if kind in NAMED_SECTION_KINDS and name.strip():
            named[(kind, name.strip())] = dict(parser.items(section))
        elif section != FILE_SECTION:
            unknown_sections.append(section)
    if parser.defaults():  # configparser hides [DEFAULT] from sections(); it is not ours either
        unknown_sections.insert(0, parser.default_section)
    if unknown_sections:
        raise UserError(f"config file {path!r}: unknown section [{unknown_sections[0]}]")
    raw = dict(parser.items(FILE_SECTION)) if parser.has_section(FILE_SECTION) else {}
    for key in raw:
        if key not in BY_NAME:
            raise UserError(f"config file {path!r}: unknown setting {key!r}")
        if BY_NAME[key].secret:
            raise UserError(f"config file {path!r}: {key} must come from the environment "
                            f"({BY_NAME[key].env_name}), not the config file")
    return raw, named


def load(flags: Optional[Mapping[str, Optional[str]]] = None, path: Optional[str] = None,
         environ: Optional[Mapping[str, str]] = None) -> Config:
    """Build the effective Config from defaults, file, environment and flags."""
    flags = flags or {}
    environ = os.environ if environ is None else environ
    path = path or environ.get(ENV_PREFIX + "CONFIG") or None
    from_file, sections = read_file(path) if path else ({}, {})
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    file_values: dict[str, Any] = {}
    for setting in SETTINGS:
        value, source = setting.default, "default"
        if setting.name in from_file:
            value, source = _parse(setting, from_file[setting.name], f"config file {path!r}"), "file"
            file_values[setting.name] = value
        if setting.env_name in environ:
            value, source = _parse(setting, environ[setting.env_name], setting.env_name), "env"
        flag = flags.get(setting.name)
        if flag is not None:
            value, source = _parse(setting, flag, setting.flag_name), "flag"
        values[setting.name], sources[setting.name] = value, source
    return Config(values, sources, path, sections, file_values)


