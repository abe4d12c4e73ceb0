"""Shell completion answers: walk the argparse tree along the words typed so far.

`ddconsole __complete SHELL -- WORD...` (called by the scripts `ddconsole completion SHELL`
prints) gets the words after `ddconsole`, the last one being the word under the cursor, and
prints one candidate a line: verbs, sub-verbs, flags, choices, and dynamic values read from
disk without starting anything (profiles, their layouts and variants, server ids, run ids).
`__files__`/`__dirs__` ask the shell for its own path completion.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

FILES = "__files__"
DIRS = "__dirs__"

# What a positional or an option's value is, by its metavar; the verbs' modules stay as they
# are (their metavars already say what they take).
KIND_BY_METAVAR = {
    "PROFILE": "profile",
    "L": "layout",
    "V": "variant",
    "ID": "server",
    "RUN": "run",
    "RUN1": "run",
    "RUN2": "run",
    "FILE": "file",
    "FILE.toml": "file",
    "FILE.jsonl": "file",
    "LOGFILE": "file",
    "PATH": "file",
    "DIR": "dir",
    "RUN_DIR": "dir",
}
KIND_BY_VERB = {("profiles show", "name"): "profile", ("profiles check", "name"): "profile"}
KIND_BY_OPTION = {"--host": "host"}


@dataclass
class Context:
    """What the words before the cursor said: the verb path, the parser it reached, the
    values given so far and whether `--demo` was among them."""

    parser: argparse.ArgumentParser
    path: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    positionals_done: int = 0
    pending: argparse.Action | None = None
    demo: bool = False
    raw: bool = False
    """After `--` or in a verb that takes raw arguments (`sim`)."""


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:  # type: ignore[type-arg]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _shown_verbs(action: argparse._SubParsersAction) -> list[str]:  # type: ignore[type-arg]
    return [choice.dest for choice in action._choices_actions]


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    ]


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0 and not isinstance(
        action,
        argparse._StoreTrueAction
        | argparse._StoreFalseAction
        | argparse._StoreConstAction
        | argparse._CountAction
        | argparse._HelpAction
        | argparse._VersionAction,
    )


def _option(parser: argparse.ArgumentParser, word: str) -> argparse.Action | None:
    """The action `word` (`--flag`, `--flag=value`, `-f`) names, allowing argparse's unique
    prefixes of long flags."""
    flag = word.split("=", 1)[0]
    table = parser._option_string_actions
    if flag in table:
        return table[flag]
    if flag.startswith("--"):
        matches = {table[o] for o in table if o.startswith(flag)}
        if len(matches) == 1:
            return matches.pop()
    return None


def walk(parser: argparse.ArgumentParser, words: list[str]) -> Context:
    """Follow `words` (those before the cursor) through the parser tree."""
    context = Context(parser)
    for word in words:
        if context.pending is not None:
            context.values[context.pending.dest] = word
            context.pending = None
            continue
        if context.raw:
            continue
        if word == "--":
            context.raw = True
            continue
        if word.startswith("-") and word != "-":
            action = _option(context.parser, word)
            if action is not None and action.dest == "demo":
                context.demo = True
            if action is not None and _takes_value(action):
                if "=" in word:
                    context.values[action.dest] = word.split("=", 1)[1]
                else:
                    context.pending = action
            continue
        verbs = _subparsers(context.parser)
        if verbs is not None and word in verbs.choices and context.positionals_done == 0:
            context.parser = verbs.choices[word]
            context.path.append(word)
            context.positionals_done = 0
            context.raw = context.parser.prefix_chars != "-"
            continue
        positionals = _positionals(context.parser)
        if context.positionals_done < len(positionals):
            action = positionals[context.positionals_done]
            context.values.setdefault(action.dest, word)
            if action.nargs not in ("*", "+", argparse.REMAINDER):
                context.positionals_done += 1
    return context


# -- dynamic values -----------------------------------------------------------------------


def _shipped_profiles_dir() -> Path:
    """console.profiles.loader.shipped_profiles_dir without importing the loader (pydantic
    would add a third of a second to every TAB)."""
    package_dir = Path(__file__).resolve().parent.parent
    checkout = package_dir.parent / "profiles"
    if checkout.is_dir() and (package_dir.parent / "pyproject.toml").is_file():
        return checkout
    return package_dir / "_shipped_profiles"


def _profile_files() -> dict[str, Path]:
    from console.core.paths import user_profiles_dir

    found: dict[str, Path] = {}
    for folder in (_shipped_profiles_dir(), user_profiles_dir()):  # user files override
        try:
            found.update({p.stem: p for p in folder.glob("*.toml") if p.is_file()})
        except OSError:
            continue
    return found


def profiles(context: Context) -> list[str]:
    return sorted(_profile_files())


def _profile_table(context: Context, key: str) -> list[str]:
    path = _profile_files().get(context.values.get("profile", ""))
    if path is None:
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    table = data.get(key)
    return [str(name) for name in table] if isinstance(table, dict) else []


def layouts(context: Context) -> list[str]:
    return _profile_table(context, "layouts")


def variants(context: Context) -> list[str]:
    return _profile_table(context, "variants")


def servers(context: Context) -> list[str]:
    from console.core.paths import StatePaths

    folder = StatePaths.for_mode(context.demo).servers
    try:
        names = [p.name for p in folder.glob("*.json")]
    except OSError:
        return []
    return sorted(n[:-5] for n in names if not n.endswith((".spawn.json", ".exit.json")))


def runs(context: Context) -> list[str]:
    from console.core.paths import StatePaths

    folder = StatePaths.for_mode(context.demo).runs
    try:
        return sorted(
            (p.name for p in folder.iterdir() if (p / "run.json").is_file()), reverse=True
        )
    except OSError:
        return []


def hosts(context: Context) -> list[str]:
    """The host names of hosts.toml (`local` first); none from a damaged file."""
    from console.core.errors import ConsoleError
    from console.fleet.hosts import load_hosts

    try:
        return [host.name for host in load_hosts()]
    except ConsoleError:
        return []


SOURCES: dict[str, Callable[[Context], list[str]]] = {
    "profile": profiles,
    "layout": layouts,
    "variant": variants,
    "server": servers,
    "run": runs,
    "host": hosts,
    "file": lambda context: [FILES],
    "dir": lambda context: [DIRS],
}


def _kind(context: Context, action: argparse.Action) -> str | None:
    explicit = getattr(action, "complete", None)
    if isinstance(explicit, str):
        return explicit
    by_option = next(
        (KIND_BY_OPTION[o] for o in action.option_strings if o in KIND_BY_OPTION), None
    )
    by_verb = KIND_BY_VERB.get((" ".join(context.path), action.dest))
    return by_option or by_verb or KIND_BY_METAVAR.get(str(action.metavar))


def _values(context: Context, action: argparse.Action) -> list[str]:
    if action.choices is not None:
        return [str(choice) for choice in action.choices]
    kind = _kind(context, action)
    return SOURCES[kind](context) if kind in SOURCES else []


def _flags(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        for option in action.option_strings:
            if option.startswith("--"):
                yield option


def _sglang_flags() -> list[str]:
    """`ddconsole sim`'s flags: SGLang 0.5.23's own and the simulator's."""
    from console.profiles.flagcheck import sglang_long_options

    return sorted({*sglang_long_options(), "--sim-speed", "--sim-seed", "--sim-fault"})


def candidates(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """What may replace the last of `words` (the word under the cursor, possibly empty)."""
    before, current = words[:-1], (words[-1] if words else "")
    # bash splits `--layout=tp1` at `=`: put such words back together.
    joined: list[str] = []
    for word in before:
        if joined and (word == "=" or joined[-1].endswith("=")) and joined[-1].startswith("-"):
            joined[-1] += word
        else:
            joined.append(word)
    if joined and joined[-1].startswith("--") and joined[-1].endswith("="):
        joined[-1] = joined[-1][:-1]  # `--layout=` then the value under the cursor
    if current == "=":
        current = ""
    context = walk(parser, joined)
    found: list[str]
    flag, equals, value = current.partition("=")
    option = _option(context.parser, flag) if equals and flag.startswith("--") else None
    if option is not None and _takes_value(option) and context.pending is None:
        # zsh and fish keep `--layout=tp` one word: complete its value, the flag kept.
        return [f"{flag}={v}" for v in _values(context, option) if v.startswith(value)]
    if context.pending is not None:
        found = _values(context, context.pending)
    elif context.path[:1] == ["sim"]:
        found = _sglang_flags() if current.startswith("-") else [FILES]
    elif context.raw:
        found = [FILES]
    elif current.startswith("-"):
        found = list(dict.fromkeys(_flags(context.parser)))
    else:
        verbs = _subparsers(context.parser)
        positionals = _positionals(context.parser)
        if verbs is not None and context.positionals_done == 0:
            found = _shown_verbs(verbs)
        elif context.positionals_done < len(positionals):
            found = _values(context, positionals[context.positionals_done])
        else:
            found = list(dict.fromkeys(_flags(context.parser)))
    special = [c for c in found if c in (FILES, DIRS)]
    return special + [c for c in found if c not in special and c.startswith(current)]
