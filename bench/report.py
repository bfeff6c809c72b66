"""The benchmark's result rows and the printed table.

Units: MB = 1e6 bytes and GB = 1e9 bytes of payload (key + value; headers and protocol overhead
not counted). Rates are the copy rate (first record landed -> all landed); "wall s" is from launch
(process or client start) to done. CPU is user + system seconds of the process doing the copy:
"CPU s" over the copy phase (what CPU s/GB is computed from), "CPU tot" from launch to done.
"brk s" is what the brokers' JVMs used over the same copy phase, and "all s/GB" the two together
per GB: what a run costs the machine, whose 2 cores the copier and both brokers share.
"other%" is the share of the machine's CPU capacity used in the copy window by processes outside
the benchmark (not this process, its brokers, or the MM2 JVM): a busy machine makes a row noisy.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from bench.measure import Latency, Span

__all__ = ["NOISY_PCT", "Row", "format_table", "machine_bound_lines", "ratio_lines"]

NOISY_PCT = 10.0  # rows where other processes used more of the machine than this get a '*'
_CPUS = len(os.sched_getaffinity(0))

_COLUMNS = (
    ("run", "<", 34),
    ("size", "<", 6),
    ("records", ">", 9),
    ("rec/s", ">", 9),
    ("MB/s", ">", 7),
    ("wall s", ">", 7),
    ("p50 ms", ">", 7),
    ("p99 ms", ">", 7),
    ("CPU s", ">", 7),
    ("CPU tot", ">", 7),
    ("CPU s/GB", ">", 8),
    ("brk s", ">", 6),
    ("all s/GB", ">", 8),
    ("other%", ">", 7),
)


@dataclass
class Row:
    """One measured run: ``kind`` groups rows for the ratios (raw-produce, mirrorlake, mm2, ...)."""

    name: str
    kind: str
    size_label: str
    record_bytes: int
    span: Span
    latency: Latency | None = None

    @property
    def records_per_s(self) -> float:
        return self.span.copy_records / self.span.copy_seconds

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * self.record_bytes / 1e6

    @property
    def cpu_per_gb(self) -> float:
        gigabytes = self.span.copy_records * self.record_bytes / 1e9
        return self.span.copy_cpu / gigabytes if gigabytes else float("nan")

    @property
    def machine_cpu_per_gb(self) -> float:
        """The copier's and the brokers' CPU seconds per GB: the run's cost to the whole machine."""
        gigabytes = self.span.copy_records * self.record_bytes / 1e9
        return (self.span.copy_cpu + self.span.broker_cpu) / gigabytes if gigabytes else float("nan")

    @property
    def cores_busy(self) -> float:
        """Cores the copier and the brokers kept busy on average over the copy window."""
        return (self.span.copy_cpu + self.span.broker_cpu) / self.span.copy_seconds

    @property
    def other_load_pct(self) -> float:
        """Share of the machine's CPU capacity that processes outside the benchmark used in the window."""
        return 100 * self.span.foreign_cpu / (self.span.copy_seconds * _CPUS)

    def cells(self) -> list[str]:
        p50 = self.latency.percentile(50) if self.latency else None
        p99 = self.latency.percentile(99) if self.latency else None
        return [
            self.name,
            self.size_label,
            f"{self.span.records:,}".replace(",", "_"),
            f"{self.records_per_s:,.0f}",
            f"{self.mb_per_s:.1f}",
            f"{self.span.wall_seconds:.1f}",
            "-" if p50 is None else f"{p50:.1f}",
            "-" if p99 is None else f"{p99:.1f}",
            f"{self.span.copy_cpu:.1f}",
            f"{self.span.total_cpu:.1f}",
            f"{self.cpu_per_gb:.1f}",
            f"{self.span.broker_cpu:.1f}",
            f"{self.machine_cpu_per_gb:.1f}",
            f"{self.other_load_pct:.0f}{'*' if self.other_load_pct > NOISY_PCT else ''}",
        ]


def format_table(rows: Iterable[Row]) -> str:
    def line(cells: list[str]) -> str:
        return "  ".join(f"{c:{align}{width}}" for c, (_, align, width) in zip(cells, _COLUMNS, strict=True))

    header = line([name for name, _, _ in _COLUMNS])
    return "\n".join([header, "-" * len(header), *(line(r.cells()) for r in rows)])


def _find(rows: list[Row], kind: str, size_label: str) -> Row | None:
    return next((r for r in rows if r.kind == kind and r.size_label == size_label), None)


def ratio_lines(rows: list[Row], *, ours: str, against: dict[str, str]) -> list[str]:
    """``ours/other`` records/s ratios per size, for each ``kind -> description`` in ``against``."""
    out = []
    sizes = list(dict.fromkeys(r.size_label for r in rows))
    for kind, description in against.items():
        for size in sizes:
            mine, other = _find(rows, ours, size), _find(rows, kind, size)
            if mine and other:
                out.append(
                    f"{ours}/{description} {size}: {mine.records_per_s / other.records_per_s:.2f} (records/s), "
                    f"CPU s/GB {mine.cpu_per_gb / other.cpu_per_gb:.2f}, "
                    f"with the brokers' {mine.machine_cpu_per_gb / other.machine_cpu_per_gb:.2f}"
                )
    return out


def machine_bound_lines(rows: list[Row], *, ours: str, limit: str) -> list[str]:
    """Per size, how far ``ours`` can get to ``limit`` (e.g. raw produce-only) on this machine's cores.

    A copy costs the machine its copier's CPU and both brokers'; a produce-only run, one producer's
    and one broker's. With the cores equally busy, the rate ratio cannot exceed the inverse ratio
    of the two runs' CPU per record: the line prints that bound beside the measured ratio.
    """
    out = []
    for size in dict.fromkeys(r.size_label for r in rows):
        mine, other = _find(rows, ours, size), _find(rows, limit, size)
        if not (mine and other) or not mine.span.broker_cpu or not other.span.broker_cpu:
            continue
        per_record = mine.machine_cpu_per_gb / other.machine_cpu_per_gb
        out.append(
            f"{ours} {size}: {per_record:.2f}x the CPU per record of {limit} (its own and the brokers'); "
            f"cores busy {mine.cores_busy:.2f} vs {other.cores_busy:.2f} of {_CPUS}; "
            f"at equal cores busy {ours}/{limit} <= {1 / per_record:.2f}, measured "
            f"{mine.records_per_s / other.records_per_s:.2f}"
        )
    return out
