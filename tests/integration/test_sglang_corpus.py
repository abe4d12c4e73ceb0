"""Every text in the SGLang 0.5.23 corpus still occurs where the corpus says, in the installed
sglang==0.5.23 venv (and the libraries it pulls in), so an upgrade that rewords a log line or an
error fails here instead of silently breaking classification and milestones."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.sglang_corpus import Entry, load

pytestmark = pytest.mark.sglang

# How far from the cited line a constant may sit (a message built over several source lines).
LINE_SLACK = 20
# Packages a text.s `source` names, as importable modules of the venv.
_MODULES = {
    "sglang": "sglang",
    "torch": "torch",
    "triton": "triton",
    "transformers": "transformers",
    "huggingface_hub": "huggingface_hub",
    "uvicorn": "uvicorn",
    "nvidia": "nvidia",
}
_PROBE = r"""
import importlib.util, json, os, sys, sysconfig
roots = {}
for name in %s:
    spec = importlib.util.find_spec(name)
    if spec and spec.origin:
        roots[name] = os.path.dirname(spec.origin)
    elif spec and spec.submodule_search_locations:  # a namespace package (nvidia)
        roots[name] = list(spec.submodule_search_locations)[0]
    else:
        roots[name] = None
roots["cpython"] = sysconfig.get_paths()["stdlib"]
binaries = [os.path.realpath(sys.executable)]
libdir = sysconfig.get_config_var("LIBDIR") or ""
ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
if libdir and ldlib and os.path.exists(os.path.join(libdir, ldlib)):
    binaries.append(os.path.realpath(os.path.join(libdir, ldlib)))
print(json.dumps({"roots": roots, "interpreter": binaries}))
"""


@pytest.fixture(scope="module")
def venv_layout(sglang_python: str) -> dict[str, object]:
    completed = subprocess.run(
        [sglang_python, "-c", _PROBE % json.dumps(sorted(_MODULES.values()))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    layout: dict[str, object] = json.loads(completed.stdout)
    return layout


def _check_text_file(entry: Entry, path: Path) -> None:
    lines = path.read_text(errors="replace").splitlines()
    for wanted in entry.constants:
        hits = [number for number, line in enumerate(lines, 1) if wanted in line]
        assert hits, f"{entry.id}: {wanted!r} no longer occurs in {path}"
        if entry.line:
            near = [n for n in hits if abs(n - entry.line) <= LINE_SLACK]
            assert near, f"{entry.id}: {wanted!r} is in {path} at {hits}, not near {entry.line}"


def _check_binary(entry: Entry, paths: list[Path]) -> None:
    blobs = [path.read_bytes() for path in paths]
    for constant in entry.constants:
        assert any(constant.encode() in blob for blob in blobs), (
            f"{entry.id}: {constant!r} no longer occurs in {', '.join(map(str, paths))}"
        )


@pytest.mark.parametrize("entry", load(), ids=lambda entry: entry.id)
def test_corpus_text_occurs_in_the_installed_source(
    entry: Entry, venv_layout: dict[str, object]
) -> None:
    roots = venv_layout["roots"]
    assert isinstance(roots, dict)
    root = roots.get(entry.source)
    if entry.source == "cpython" and entry.file == "<interpreter>":
        binaries = venv_layout["interpreter"]
        assert isinstance(binaries, list)
        _check_binary(entry, [Path(path) for path in binaries])
        return
    if root is None:
        # Only uvicorn may be absent: the sglang venv is built without its serving extras.
        # sglang 0.5.23 requires uvicorn>=0.51 (its METADATA); ddconsole's own venv has one.
        assert entry.source == "uvicorn", f"{entry.id}: {entry.source} is not in the sglang venv"
        import uvicorn

        major, minor = (int(part) for part in uvicorn.__version__.split(".")[:2])
        if (major, minor) < (0, 51):
            pytest.skip(f"uvicorn {uvicorn.__version__} here is older than sglang's >=0.51")
        root = str(Path(uvicorn.__file__).parent)
    path = Path(root) / entry.file
    assert path.is_file(), f"{entry.id}: {path} does not exist"
    if entry.line == 0:
        _check_binary(entry, [path])
    else:
        _check_text_file(entry, path)


def test_corpus_cites_sglang_for_every_sglang_failure_path() -> None:
    """The corpus covers the failure kinds issue 14 lists, each at least once."""
    kinds = {entry.kind for entry in load() if entry.group == "failure"}
    assert kinds >= {
        "cuda-oom",
        "kv-oom",
        "runtime-oom",
        "version-mismatch",
        "import-error",
        "config-error",
        "gated-repo",
        "model-not-found",
        "port-in-use",
        "bad-flag",
        "nccl",
        "cuda-error",
        "scheduler-exception",
    }
