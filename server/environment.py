"""`serve`'s options from the environment, as container platforms pass settings (ConfigMaps,
Secrets): `A2A_GRPC_<OPTION>` for every option of the command line.

The rules (docs/server.md, "Settings from the environment", lists every variable in the table
`table` makes):

- **Names.** `A2A_GRPC_` and the option's long name upper-cased, dashes as underscores:
  `--max-tasks` is `A2A_GRPC_MAX_TASKS`. An on/off option is named for what it turns on:
  `--metrics` / `--no-metrics` is `A2A_GRPC_METRICS`, and `--no-compat-03` is
  `A2A_GRPC_COMPAT_03` (`false` is what `--no-compat-03` does); the negative spelling
  (`A2A_GRPC_NO_COMPAT_03`) is refused with the right one, not silently read or ignored.
- **Values.** What the option takes after it on the command line, converted and checked the
  same way; an on/off option takes `true` or `false` (also `1`/`0`, `yes`/`no`, `on`/`off`, any
  case), and a repeatable option its items comma-separated. A variable set to the empty string
  counts as unset (templates often render an unused setting so).
- **Files.** `A2A_GRPC_<OPTION>_FILE` names a file whose content, surrounding whitespace
  stripped, is the value, so that a setting kept in a Kubernetes Secret or ConfigMap can be
  mounted rather than put in the environment: for every option that takes a value, but those
  whose value is a file's path already (`FILE_METAVARS`). Setting both forms of one option is
  an error.
- **Flags win.** A variable is not read when the command line gives its option; options listed
  together in `alternatives` (`--store` and `--store-file`: two ways to give one setting) count
  as one, so a flag for either hides the variables of both.
- **Errors.** A value the option would refuse is a usage error naming the variable.
- **Other names.** `A2A_GRPC_TOKENS` (bearer tokens, read by the authenticator) and
  `A2A_GRPC_REQUIRE_*` (the test suite's switches) belong to others. Any other `A2A_GRPC_`
  variable is not read, and `unread` names it (with the variable it may have meant), for one
  warning at start-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PREFIX = "A2A_GRPC_"
FILE_SUFFIX = "_FILE"
OTHERS_PREFIXES = ("A2A_GRPC_REQUIRE_",)
"""Prefixes of variables that belong to others (the test suite's switches): never reported."""
FILE_METAVARS = frozenset({"FILE", "PEM", "JWKS", "URL|FILE", "MODULE:ATTR|FILE.py:ATTR"})
"""Metavars of the options whose value names a file already (`--tls-cert PEM`): they have no
`_FILE` form, since pointing `A2A_GRPC_TLS_CERT_FILE` at the certificate itself would be the
natural mistake; that name is refused, saying which variable to set."""
TRUE = frozenset({"true", "1", "yes", "on"})
FALSE = frozenset({"false", "0", "no", "off"})


class SettingError(ValueError):
    """A variable that cannot be used; the message names it and says what to fix."""


@dataclass(frozen=True)
class Variable:
    """One option's variable."""

    name: str
    """`A2A_GRPC_MAX_TASKS`."""
    action: argparse.Action
    option: str
    """The option it stands for, as the command line spells it (`--max-tasks`)."""

    @property
    def is_flag(self) -> bool:
        """An on/off option (`true` or `false`)."""
        return self.action.nargs == 0

    @property
    def names_a_file(self) -> bool:
        """Its value is a file's path (or may be)."""
        return self.action.metavar in FILE_METAVARS

    @property
    def file_name(self) -> str | None:
        """The name of the form that reads the value from a file (None for a flag, and for an
        option whose value names a file already)."""
        return None if self.is_flag or self.names_a_file else self.name + FILE_SUFFIX

    def value_text(self) -> str:
        """What the variable holds, in words, for the docs' table."""
        action = self.action
        if self.is_flag:
            return "`true` or `false`"
        if action.choices is not None:
            return "one of " + ", ".join(f"`{choice}`" for choice in action.choices)
        if action.type is int:
            return "integer"
        if action.type is float:
            return "number" + (" (seconds)" if action.metavar == "SECONDS" else "")
        return f"`{action.metavar}`" if action.metavar else "text"


def variable_name(option: str) -> str:
    """`--max-tasks` → `A2A_GRPC_MAX_TASKS`."""
    return PREFIX + option.removeprefix("--").upper().replace("-", "_")


def variables(command: argparse.ArgumentParser) -> list[Variable]:
    """The variable of each documented option of `command`, in the order of its help."""
    found = []
    for action in command._actions:  # argparse has no public list of a parser's options
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        option = next(name for name in action.option_strings if name.startswith("--"))
        if isinstance(action, argparse._StoreFalseAction) and option.startswith("--no-"):
            name = variable_name("--" + option.removeprefix("--no-"))
        else:
            name = variable_name(option)
        found.append(Variable(name, action, option))
    return found


@dataclass(frozen=True)
class Reading:
    """What the environment sets: the options' values by dest, and where each came from."""

    values: dict[str, object]
    sources: dict[str, str]
    """dest → the variable that set it."""
    unread: list[str]
    """One line per `A2A_GRPC_` variable nobody reads, saying so."""
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    """dest → its option (`--max-tasks`), for the dests the environment set."""

    def blame(self, message: str) -> str:
        """For an error `message` about the settings: `" (set by A2A_GRPC_X)"` naming the
        variables that set the options or fields it names; "" when it names none of them."""
        names = [
            variable
            for dest, variable in self.sources.items()
            if re.search(rf"(?<![\w-])({re.escape(self.options[dest])}|{dest})(?![\w-])", message)
        ]
        return f" (set by {', '.join(names)})" if names else ""


NOTHING_READ = Reading({}, {}, [])
"""What an empty environment sets."""


def read(
    command: argparse.ArgumentParser,
    environ: Mapping[str, str],
    *,
    given: Collection[str] = (),
    alternatives: Iterable[Collection[str]] = (),
    others: Collection[str] = (),
) -> Reading:
    """The option values `environ` sets for `command`, except for the dests in `given` (the
    command line's) and their `alternatives`; `others` are variable names read elsewhere.
    SettingError for a variable that cannot be used."""
    hidden = set(given)
    for group in alternatives:
        if hidden & set(group):
            hidden |= set(group)
    known = variables(command)
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    options: dict[str, str] = {}
    taken = {variable.name for variable in known}
    for variable in known:
        text, source = _text(variable, environ, taken)
        if text is None or variable.action.dest in hidden:
            continue
        values[variable.action.dest] = _convert(command, variable, text, source)
        sources[variable.action.dest] = source
        options[variable.action.dest] = variable.option
    for group in alternatives:
        both = [sources[dest] for dest in group if dest in sources]
        if len(both) > 1:
            raise SettingError(f"{' and '.join(both)} give one setting two ways: set one")
    return Reading(values, sources, _unread(known, environ, taken, others), options)


def _text(
    variable: Variable, environ: Mapping[str, str], taken: Collection[str]
) -> tuple[str | None, str]:
    """The variable's text (None: unset) and the name it came from."""
    direct = environ.get(variable.name, "")
    file_name = variable.file_name
    # An option named --X-file has A2A_GRPC_X_FILE as its own variable (--store-file), which
    # the file form of --X would clash with: the option's own variable is what it means.
    from_file = "" if file_name is None or file_name in taken else environ.get(file_name, "")
    if direct and from_file:
        raise SettingError(f"{variable.name} and {file_name} are both set: set one")
    if from_file:
        assert file_name is not None
        try:
            content = Path(from_file).read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise SettingError(f"{file_name}: cannot read {from_file}: {reason}") from exc
        if not content:
            raise SettingError(f"{file_name}: {from_file} is empty")
        return content, file_name
    negative = PREFIX + "NO_" + variable.name.removeprefix(PREFIX)
    if variable.is_flag and environ.get(negative, "") and negative not in taken:
        raise SettingError(f"{negative} is not read: set {variable.name}=false instead")
    indirect = variable.name + FILE_SUFFIX
    if variable.names_a_file and environ.get(indirect, "") and indirect not in taken:
        raise SettingError(
            f"{indirect} is not read: {variable.name} names the file itself "
            f"({variable.option} {variable.action.metavar})"
        )
    return (direct or None), variable.name


def _convert(
    command: argparse.ArgumentParser, variable: Variable, text: str, source: str
) -> object:
    """`text` as the option's value, converted and checked as the command line would."""
    action = variable.action
    if variable.is_flag:
        word = text.strip().lower()
        if word not in TRUE | FALSE:
            raise SettingError(f"{source}: expected true or false, got {text!r}")
        on = word in TRUE
        # store_true and --X/--no-X: on is True; a --no-X option's variable is named for X.
        return on
    value: Any = text
    if action.type is not None:
        converter = action.type
        assert callable(converter)
        try:
            value = converter(text)
        except argparse.ArgumentTypeError as exc:
            raise SettingError(f"{source}: {exc}") from None
        except (TypeError, ValueError):
            kind = getattr(converter, "__name__", "")
            raise SettingError(f"{source}: invalid {kind} value: {text!r}") from None
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise SettingError(f"{source}: {text!r} is not one of {choices}")
    # The action itself stores the value (a repeatable option splits its items).
    scratch = argparse.Namespace(**{action.dest: action.default})
    action(command, scratch, value, variable.option)
    return getattr(scratch, action.dest)


def _unread(
    known: Sequence[Variable],
    environ: Mapping[str, str],
    taken: Collection[str],
    others: Collection[str],
) -> list[str]:
    names = [*taken, *(v.file_name for v in known if v.file_name and v.file_name not in taken)]
    refused = {PREFIX + "NO_" + v.name.removeprefix(PREFIX) for v in known if v.is_flag}
    refused |= {v.name + FILE_SUFFIX for v in known if v.names_a_file}
    lines = []
    for name in sorted(environ):
        if (
            not name.startswith(PREFIX)
            or name in names
            or name in refused
            or name in others
            or name.startswith(OTHERS_PREFIXES)
        ):
            continue
        # A guess of the same form: a file form for a name ending in _FILE, else an option's.
        form = name.endswith(FILE_SUFFIX)
        alike = [known for known in names if known.endswith(FILE_SUFFIX) == form]
        close = difflib.get_close_matches(name, alike, n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        lines.append(f"{name} is set but names no serve option, so it is not read{hint}")
    return lines


def given_on_command_line(command: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The dests of the options `argv` gives; `argv` must be one `command` parses without
    error (each dest starts as a marker; what the parse replaces, the command line gave)."""
    unset = object()
    probe = argparse.Namespace(
        **{action.dest: unset for action in command._actions if action.dest != argparse.SUPPRESS}
    )
    command.parse_known_args(list(argv), probe)
    return {dest for dest, value in vars(probe).items() if value is not unset}


def table(command: argparse.ArgumentParser) -> str:
    """The docs' table of every variable: its name, its option, what it holds."""
    rows = ["| variable | option | value | or from a file |", "|---|---|---|---|"]
    for variable in variables(command):
        option = "`" + "` / `".join(variable.action.option_strings) + "`"
        file_name = variable.file_name
        if file_name is None:
            from_file = "(names a file)" if variable.names_a_file else ""
        else:
            from_file = f"`{file_name}`"
        cells = (f"`{variable.name}`", option, variable.value_text(), from_file)
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)
