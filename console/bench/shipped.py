"""Campaign files the console offers: the user's, then the shipped ones."""

from __future__ import annotations

from pathlib import Path

from console.core.paths import config_dir


def shipped_campaigns_dir() -> Path:
    """`campaigns/` of a source checkout, else the copy packed inside the wheel."""
    package_dir = Path(__file__).resolve().parent.parent
    checkout = package_dir.parent / "campaigns"
    if checkout.is_dir() and (package_dir.parent / "pyproject.toml").is_file():
        return checkout
    return package_dir / "_shipped_campaigns"


def user_campaigns_dir() -> Path:
    return config_dir() / "campaigns"


def campaign_files() -> list[Path]:
    """Every campaign file by name; a user file replaces a shipped one of the same name."""
    found: dict[str, Path] = {}
    for folder in (shipped_campaigns_dir(), user_campaigns_dir()):
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                found[path.name] = path
    return [found[name] for name in sorted(found)]


DEMO_CAMPAIGN = "qwen-ddtree-budgets.toml"
