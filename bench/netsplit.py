"""Network partitions between one local process and one local broker, with iptables (root only).

Everything here runs on 127.0.0.1, so a partition cannot be made by address. A process to cut off
is started under a group id of its own (``setpriv --regid``: its user, and so its file access,
stays the same), and a partition is one ``OUTPUT`` rule that drops every packet that group sends to
the broker's port: the process's open connections go silent (no reset, as behind a dropped network
path) and its new ones time out, while every other client of the broker goes on. Rules carry a
comment naming the run's kind (``tag``), so the rules a killed run left are found and removed by
the next (``clear``) and two kinds of run (the soak, this module's test) never touch each other's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GID_BASE", "CHAOS", "unavailable", "as_group", "partitioned", "clear"]

GID_BASE = 47_000  # process i of a run is cut off through group GID_BASE + i
CHAOS = "mirrorlake-chaos"  # the soak's tag


def unavailable() -> str | None:
    """Why partitions cannot be made on this machine (None: they can)."""
    if os.geteuid() != 0:
        return "not root (iptables rules need root)"
    for tool in ("iptables", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install {'iptables' if tool == 'iptables' else 'util-linux'})"
    probe = subprocess.run(["iptables", "-S", "OUTPUT"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"iptables does not work here: {probe.stderr.strip()}"
    return None


def as_group(gid: int) -> list[str]:
    """The command prefix that runs a process under group ``gid`` (and no supplementary groups)."""
    return ["setpriv", f"--regid={gid}", "--clear-groups", "--"]


def _rule(gid: int, port: int, tag: str) -> list[str]:
    return ["OUTPUT", "-o", "lo", "-p", "tcp", "--dport", str(port), "-m", "owner", "--gid-owner", str(gid),
            "-m", "comment", "--comment", tag, "-j", "DROP"]  # fmt: skip


@contextmanager
def partitioned(gid: int, port: int, tag: str = CHAOS) -> Iterator[None]:
    """Drop what group ``gid`` sends to ``port`` on 127.0.0.1 for the block; the rule goes at the end
    (already gone if ``clear`` took it meanwhile)."""
    subprocess.run(["iptables", "-A", *_rule(gid, port, tag)], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["iptables", "-D", *_rule(gid, port, tag)], check=False, capture_output=True)


def clear(tag: str = CHAOS) -> int:
    """Remove every rule of ``tag`` a run left (killed before its block ended); how many there were."""
    listed = subprocess.run(["iptables", "-S", "OUTPUT"], capture_output=True, text=True, check=True).stdout
    stale = [line.split()[1:] for line in listed.splitlines() if line.startswith("-A ") and f"--comment {tag} " in line]
    for rule in stale:
        subprocess.run(["iptables", "-D", *rule], check=True, capture_output=True)
    return len(stale)
