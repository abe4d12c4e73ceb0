"""Find and load profile files: shipped ones, then the user's, which override by name."""

from __future__ import annotations

import difflib
import errno
import os
import reprlib
import stat
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from console.core.errors import ProfileError, UsageError
from console.core.paths import user_profiles_dir
from console.profiles.models import Profile

Origin = Literal["shipped", "user"]


def shipped_profiles_dir() -> Path:
    """`profiles/` of a source checkout, else the copy packed inside the wheel."""
    package_dir = Path(__file__).resolve().parent.parent
    checkout = package_dir.parent / "profiles"
    if checkout.is_dir() and (package_dir.parent / "pyproject.toml").is_file():
        return checkout
    return package_dir / "_shipped_profiles"


@dataclass(frozen=True)
class LoadedProfile:
    """A profile that validated, with where it came from (for messages about it)."""

    name: str
    path: Path
    origin: Origin
    profile: Profile


@dataclass(frozen=True)
class ProfileEntry:
    """One profile name as `profiles list` shows it: loaded, or broken with the reason."""

    name: str
    path: Path
    origin: Origin
    loaded: LoadedProfile | None
    error: ProfileError | None
    overrides: Path | None = None


def _read_regular_text(path: Path) -> str:
    """The UTF-8 text of a regular file (through symlinks). Never blocks on a FIFO or a
    device: anything else named *.toml is an OSError whose message says what it is."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise OSError(f"dangling symlink to {os.readlink(path)}") from None
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError("symlink loop") from None
        raise
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"not a regular file ({_file_kind(info.st_mode)})")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped since the stat
            raise OSError("not a regular file")
        data = handle.read()
    return data.decode("utf-8")


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a plain file"


def read_toml_file(path: Path) -> dict[str, Any]:
    """A TOML file as a table; ProfileError naming the file for anything that is not readable
    TOML text: syntax, encoding, nesting too deep for the parser, not a regular file."""
    try:
        return tomllib.loads(_read_regular_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(str(path), "", f"TOML syntax error: {exc}") from None
    except UnicodeDecodeError:
        raise ProfileError(str(path), "", "not UTF-8 text") from None
    except RecursionError:
        raise ProfileError(str(path), "", "arrays or tables nested too deeply to read") from None
    except OSError as exc:
        raise ProfileError(str(path), "", f"cannot read: {exc.strerror or exc}") from None


def load_profile_file(
    path: Path, name: str | None = None, origin: Origin = "user"
) -> LoadedProfile:
    """Read and validate one file; every problem becomes a ProfileError naming file and key."""
    profile_name = name or path.stem
    raw = read_toml_file(path)
    try:
        profile = Profile.model_validate(raw)
    except ValidationError as exc:
        raise _first_error(path, exc) from None
    except RecursionError:
        raise ProfileError(str(path), "", "values nested too deeply to check") from None
    return LoadedProfile(profile_name, path, origin, profile)


def _first_error(path: Path, exc: ValidationError) -> ProfileError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    reason = describe_error(first, loc)
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return ProfileError(str(path), format_key_path(loc), reason)


def format_key_path(loc: Sequence[int | str]) -> str:
    """`('layouts', 'tp1', 'gpus', 1)` -> `layouts.tp1.gpus[1]`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            out += " (name)"
        else:
            out += f".{part}" if out else str(part)
    return out


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 60, 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 6


def describe_error(error: Any, loc: tuple[int | str, ...]) -> str:
    kind = error["type"]
    value = _Quoted(error.get("input"))
    message = str(error["msg"])
    # Lowercase the first letter only: the rest may quote a regex, which must stay as is.
    lowered = f"{message[0].lower()}{message[1:]}" if message else kind
    if kind == "extra_forbidden":
        valid = _valid_keys_at(loc[:-1])
        suffix = f" (valid keys here: {', '.join(valid)})" if valid else ""
        return f"unknown key {loc[-1]!r}{suffix}"
    if kind == "missing":
        return "required key is missing"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"expected an integer, got {value!r}"
    if kind in ("float_parsing", "float_type"):
        return f"expected a number, got {value!r}"
    if kind in ("string_type",):
        return f"expected a string, got {value!r}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {value!r}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list, got {value!r}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a table, got {value!r}"
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return f"{value!r} is out of range: {lowered}"
    if kind == "string_pattern_mismatch":
        return f"{value!r} is not allowed here ({lowered})"
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    return lowered


class _Quoted:
    """A value as a message quotes it: its repr, shortened (a 5000-deep list or a 10 MB string
    is quoted by its beginning, never recursed through)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        try:
            return _SHORT.repr(self.value)
        except RecursionError:
            return "<nested too deeply to show>"


def _valid_keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys a table at `loc` accepts, walking the models (dict levels take a user name)."""
    current: type[BaseModel] = Profile
    parts = list(loc)
    while parts:
        field = current.model_fields.get(str(parts.pop(0)))
        target = None if field is None else _model_of(field.annotation)
        if field is None or target is None:
            return []
        if getattr(field.annotation, "__origin__", None) is dict:
            if not parts:
                return []
            parts.pop(0)
        current = target
    return sorted(current.model_fields)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_of(arg)
        if found is not None:
            return found
    return None


class ProfileCatalog:
    """Every profile name visible to the console; user files override shipped ones by name."""

    def __init__(self, shipped_dir: Path | None = None, user_dir: Path | None = None) -> None:
        self.shipped_dir = shipped_dir if shipped_dir is not None else shipped_profiles_dir()
        self.user_dir = user_dir if user_dir is not None else user_profiles_dir()

    def _files(self) -> dict[str, tuple[Path, Origin, Path | None]]:
        found: dict[str, tuple[Path, Origin, Path | None]] = {}
        for path in _toml_files(self.shipped_dir):
            found[path.stem] = (path, "shipped", None)
        for path in _toml_files(self.user_dir):
            shadowed = found.get(path.stem)
            found[path.stem] = (path, "user", shadowed[0] if shadowed else None)
        return found

    def entries(self) -> list[ProfileEntry]:
        result = []
        for name, (path, origin, overrides) in sorted(self._files().items()):
            try:
                loaded = load_profile_file(path, name, origin)
            except ProfileError as exc:
                result.append(ProfileEntry(name, path, origin, None, exc, overrides))
            else:
                result.append(ProfileEntry(name, path, origin, loaded, None, overrides))
        return result

    def names(self) -> list[str]:
        return sorted(self._files())

    def get(self, name: str) -> LoadedProfile:
        files = self._files()
        if name not in files:
            raise UsageError(unknown_name_message("profile", name, files))
        path, origin, _ = files[name]
        return load_profile_file(path, name, origin)


def _toml_files(folder: Path) -> list[Path]:
    """Every entry named *.toml (a dangling symlink, a loop, a folder or a FIFO too: those
    are listed as broken with the reason, not left out)."""
    try:
        return sorted(folder.glob("*.toml"))
    except OSError:
        return []


def unknown_name_message(kind: str, name: str, valid: Iterable[str]) -> str:
    """`unknown layout 'tp3' (did you mean 'tp4'?); valid: tp1, tp4, tp8`."""
    choices = sorted(valid)
    close = difflib.get_close_matches(name, choices, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listed = ", ".join(choices) if choices else "none"
    return f"unknown {kind} {name!r}{hint}; valid: {listed}"
