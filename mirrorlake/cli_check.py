"""``mirrorlake check CONFIG``: every permission each flow needs, asked of the clusters with its credentials.

Prints one row per (cluster, resource, operation) with the feature (or command, ``--for``) that
needs it and OK, MISSING or UNKNOWN; exits 0 when nothing is MISSING, ``ExitCode.MISSING_PERMISSION`` otherwise. CONFIG
is positional or ``--config``. Runs nothing and changes nothing. ``mirrorlake.cli`` registers it
and gives it its config arguments.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click

from mirrorlake.cli_options import pick_config
from replicator.access.acl_needs import COMMANDS, Command
from replicator.config import load_config
from replicator.errors import ExitCode

__all__ = ["check"]


@click.command()
@click.option("--flow", "flows", multiple=True, help="check only this flow (A->B); repeatable")
@click.option(
    "--for",
    "commands",
    multiple=True,
    type=click.Choice(COMMANDS),
    help="the command(s) whose ACLs to check (default: replicate); repeatable",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--missing-only", is_flag=True, help="print only the rows that are not OK")
def check(
    positional_config: Path | None,
    option_config: Path | None,
    flows: tuple[str, ...],
    commands: tuple[Command, ...],
    fmt: str,
    missing_only: bool,
) -> None:
    """Before anything runs: does each flow's principal hold every ACL its features (or a command) need?

    ``--for failover`` before a disaster: the ACLs ``failover plan/apply`` will need on the target."""
    from replicator.access.permissions import check_permissions

    config = load_config(pick_config(positional_config, option_config))
    selected = config.selected_flows(flows)
    rows = check_permissions(config, selected, commands=commands or ("replicate",))
    shown = [r for r in rows if r.status != "OK"] if missing_only else rows
    if fmt == "json":
        click.echo(json.dumps([{**asdict(r.permission), "status": r.status, "principal": r.principal,
                                "detail": r.detail} for r in shown], indent=2))  # fmt: skip
    else:
        header = f"{'cluster':10} {'resource':16} {'name':40} {'operation':16} {'feature':16} status"
        click.echo(header)
        for r in shown:
            p = r.permission
            line = f"{p.cluster:10} {p.resource_type:16} {p.name:40} {p.operation:16} {p.feature:16} {r.status}"
            click.echo(line + (f"  ({r.detail})" if r.detail else ""))
    missing = [r for r in rows if r.status == "MISSING"]
    if missing:
        click.echo(f"error: {len(missing)} missing permission(s); grant: " + "; ".join(r.grant() for r in missing),
                   err=True)  # fmt: skip
        sys.exit(ExitCode.MISSING_PERMISSION)
    click.echo(f"all {len(rows)} permission(s) present" + (" or not checkable (UNKNOWN)" if any(
        r.status == "UNKNOWN" for r in rows) else ""))  # fmt: skip
