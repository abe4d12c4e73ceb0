"""Formatting and parsing of sizes, rates, durations and index ranges (pure)."""

from __future__ import annotations

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in _BYTE_UNITS:
        if abs(size) < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.{digits}f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def format_rate_bytes(value: float | None) -> str:
    """Bytes per second, SI-style units as nvidia-smi shows PCIe throughput."""
    if value is None:
        return "-"
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B/s"


def format_duration(seconds: float | None) -> str:
    """`1.2s`, `3m04s`, `2h05m`: compact elapsed times for tables."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_ms(seconds: float | None, digits: int = 1) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.{digits}f} ms"


def format_index_set(indices: list[int] | tuple[int, ...]) -> str:
    """`[0, 1, 2, 3, 6]` -> `0-3,6`, the notation of sysfs cpulists."""
    ordered = sorted(set(indices))
    if not ordered:
        return "-"
    parts: list[str] = []
    start = prev = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ",".join(parts)


MAX_INDEX_SET = 65536
"""More ids than any host has CPUs or GPUs: a longer list is a mistake, refused before it is
built."""


def parse_index_set(text: str, *, max_count: int = MAX_INDEX_SET) -> tuple[int, ...]:
    """Parse a sysfs cpulist such as `0-3,8,10-11`; raises ValueError on garbage, a negative
    id, or more than `max_count` ids."""
    result: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low_text, high_text = part.split("-", 1)
            low, high = int(low_text), int(high_text)
            if high < low or low < 0:
                raise ValueError(f"bad range {part!r}")
            if high - low + 1 + len(result) > max_count:
                raise ValueError(f"range {part!r} lists more than {max_count} ids")
            result.extend(range(low, high + 1))
        else:
            result.append(int(part))
            if len(result) > max_count:
                raise ValueError(f"more than {max_count} ids")
    return tuple(sorted(set(result)))


# Usable bandwidth per lane and direction after line encoding, bytes/s, by PCIe generation.
_PCIE_LANE_BYTES_S = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}


def pcie_link_bytes_s(gen: int | None, width: int | None) -> float | None:
    """One direction's capacity of a PCIe link (e.g. Gen5 x16: ~63 GB/s)."""
    if gen is None or width is None or gen not in _PCIE_LANE_BYTES_S or width <= 0:
        return None
    return _PCIE_LANE_BYTES_S[gen] * width
