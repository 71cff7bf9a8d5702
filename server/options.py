"""How a setting becomes a `serve` option: the `Setting` record, and what is made from a table of
them (server/settings.py holds the table): the options of the parser, and the options table of
docs/server.md. The environment's variables are read off the parser (server/environment.py).

A setting is a ServerConfig field, which holds its type, its default and the checks of its
value; its record adds the rest once: the option's spelling (from the field's name), its help,
metavar and converter, and its row in the docs. An option that is no field (`--tls-cert`: the
file is read into the TLS settings) says what it is read into instead, and has its own default.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from a2a_grpc.server.config import ServerConfig


class Kind(enum.Enum):
    """How an option is given on the command line."""

    VALUE = "value"
    """`--max-tasks N`: one value, converted."""
    FLAG = "flag"
    """`--strict-version`: on when given, off by default."""
    SWITCH = "switch"
    """`--metrics` / `--no-metrics`: either way; the default when neither is given."""
    OFF = "off"
    """`--no-compat-03`: turns off its field (`compat_03`), on by default."""
    ITEMS = "items"
    """`--trust-domain TD`: repeatable, each value comma-separated; the items in order, once
    each. The first use replaces the default."""


class _FromField:
    def __repr__(self) -> str:
        return "FROM_FIELD"


FROM_FIELD: Any = _FromField()
"""`Setting.default`: the ServerConfig field's default."""
SAME_ROW = ""
"""`Setting.doc`: the setting shares the docs row of the setting before it, whose text says
what both do."""


@dataclass(frozen=True)
class Setting:
    """One option of `serve`: the field it sets and how the command line, `--help` and the docs
    present it."""

    name: str
    """The ServerConfig field it sets, and the option's name: `max_tasks` is `--max-tasks`
    (`--no-compat-03` for Kind.OFF's `compat_03`)."""
    help: str
    """What `serve --help` says of it; `%(default)s` stands for the default."""
    doc: str
    """Its text in docs/server.md's options table (Markdown); SAME_ROW to share the row of the
    setting before it."""
    kind: Kind = Kind.VALUE
    metavar: str | None = None
    """What the help shows for the value (default: the name upper-cased); also decides whether
    the value names a file (server/environment.py's FILE_METAVARS)."""
    convert: Callable[[str], Any] | None = None
    """Turns the option's text into the field's value, raising ArgumentTypeError (or
    ValueError) when it cannot. None: the field's type when it is int or float (also `int |
    None`), else the text as given."""
    choices: tuple[str, ...] | None = None
    default: Any = FROM_FIELD
    """The option's default: FROM_FIELD for the field's; an option that is no field, or whose
    unset value the command line reads otherwise (`--http-port`: the gRPC port + 1), gives its
    own."""
    doc_default: str | None = None
    """The default as the docs table shows it, in brackets, where the value does not say it
    (`a quarter of the memory limit`); "" for none. None: the value itself."""
    into: str = ""
    """For an option that is no ServerConfig field: what its value is read into instead."""
    hidden: bool = False
    """Left out of `--help`, the environment and the docs (set only by the `--workers`
    supervisor)."""

    @property
    def option(self) -> str:
        """The option as the command line spells it: `--max-tasks`, `--no-compat-03`; a
        Kind.SWITCH's `--no-` form is added by argparse."""
        spelled = self.name.replace("_", "-")
        return f"--no-{spelled}" if self.kind is Kind.OFF else f"--{spelled}"

    def arguments(self, defaults: ServerConfig, types: Mapping[str, Any]) -> dict[str, Any]:
        """`ArgumentParser.add_argument`'s keywords for this option; `defaults` and `types`
        are ServerConfig's."""
        shown = argparse.SUPPRESS if self.hidden else self.help
        if self.kind is Kind.FLAG:
            return {"action": "store_true", "help": shown}
        if self.kind is Kind.OFF:
            return {"dest": self.name, "action": "store_false", "help": shown}
        default = self.default
        if default is FROM_FIELD:
            default = None if self.into else getattr(defaults, self.name)
        if self.kind is Kind.SWITCH:
            return {"action": argparse.BooleanOptionalAction, "default": default, "help": shown}
        if self.kind is Kind.ITEMS:
            return {
                "action": _AppendItems,
                "metavar": self.metavar,
                "default": default,
                "help": shown,
            }
        return {
            "type": self.convert or _converter(self.name, types.get(self.name)),
            "metavar": self.metavar,
            "choices": self.choices,
            "default": default,
            "help": shown,
        }


def _converter(name: str, hint: Any) -> Callable[[str], Any] | None:
    """The converter a field of type `hint` takes its option's text with (None: the text)."""
    if hint is None:  # no field: the text as given
        return None
    kinds = set(typing.get_args(hint)) - {type(None)} or {hint}
    for kind in (int, float):
        if kinds == {kind}:
            return kind
    if kinds == {str}:
        return None
    raise TypeError(f"setting {name}: a field of type {hint} needs `convert`")


def add_options(command: argparse.ArgumentParser, settings: Iterable[Setting]) -> None:
    """Adds an option to `command` for each setting, in order. TypeError for a setting that
    names no ServerConfig field without saying what else it is read into (`into`), or whose
    field's type needs a converter it does not give."""
    defaults = ServerConfig()
    types = typing.get_type_hints(ServerConfig)
    for setting in settings:
        if not setting.into and setting.name not in types:
            raise TypeError(
                f"setting {setting.name}: ServerConfig has no field of that name; an option "
                "that is no field says what it is read into (`into`)"
            )
        field_types = {} if setting.into else types
        command.add_argument(setting.option, **setting.arguments(defaults, field_types))


def options_table(settings: Iterable[Setting]) -> str:
    """docs/server.md's options table: a row per setting but those hidden, or per run of
    settings that share one (SAME_ROW), each option with its default in brackets."""
    defaults = {field.name: field for field in dataclasses.fields(ServerConfig)}
    rows: list[tuple[list[str], str]] = []
    for setting in settings:
        if setting.hidden:
            continue
        spelled = f"`{setting.option}`"
        if setting.kind is Kind.SWITCH:
            spelled += f" / `--no-{setting.option.removeprefix('--')}`"
        elif setting.metavar is not None:
            spelled = f"`{setting.option} {setting.metavar}`"
        shown = _doc_default(setting, defaults.get(setting.name))
        cell = f"{spelled} [{shown}]" if shown else spelled
        if setting.doc == SAME_ROW:
            if not rows:
                raise ValueError(f"setting {setting.name}: the first row needs its text")
            rows[-1][0].append(cell)
        else:
            rows.append(([cell], setting.doc))
    lines = ["| option | meaning |", "|---|---|"]
    for cells, text in rows:
        lines.append(f"| {_cell(', '.join(cells))} | {_cell(text)} |")
    return "\n".join(lines)


def _doc_default(setting: Setting, field: dataclasses.Field[Any] | None) -> str:
    """The default as the docs show it; "" when there is none worth showing (an empty value,
    an option off by default)."""
    if setting.doc_default is not None:
        return setting.doc_default
    if setting.kind in (Kind.FLAG, Kind.OFF):
        return ""
    if setting.default is not FROM_FIELD:
        value = setting.default
    elif field is None:  # no field, no default of its own
        value = None
    elif field.default is dataclasses.MISSING:
        # A default_factory's value depends on where the code runs (the memory limit).
        raise ValueError(f"setting {setting.name}: say its default in words (`doc_default`)")
    else:
        value = field.default
    if setting.kind is Kind.SWITCH:
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


class _AppendItems(argparse.Action):
    """A repeatable option whose values may each be comma-separated: a tuple of them all, in
    order, without repeats. The default is replaced, not extended, by the first use."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        seen = getattr(namespace, self.dest, None)
        # Anything but a tuple of earlier uses (the default, or a marker) starts afresh.
        earlier = seen if isinstance(seen, tuple) and seen is not self.default else ()
        items = [item.strip() for item in str(values).split(",") if item.strip()]
        setattr(namespace, self.dest, tuple(dict.fromkeys((*earlier, *items))))
