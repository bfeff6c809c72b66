"""``mirrorlake demo``: the batch demo, the live one (``--live``), its incidents and its end. The
command-line face of ``mirrorlake.demo`` and ``mirrorlake.live``; ``mirrorlake.cli`` registers the
group and gives every command its ``--config`` option."""

from __future__ import annotations

import threading
from pathlib import Path

import click

from mirrorlake.progress import Steps
from mirrorlake.stopping import stopping_on_signals
from replicator.config import load_config
from replicator.errors import ReplicationError

__all__ = ["demo"]


@click.group(invoke_without_command=True)
@click.option("--records", default=20_000, show_default=True, help="plain records to produce to A.orders")
@click.option("--live", is_flag=True, help="leave a live system running: traffic, replication, lakehouse, dashboard")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8501, show_default=True, help="--live: the dashboard's port"
)
@click.pass_context
def demo(ctx: click.Context, config_path: Path, records: int, live: bool, port: int) -> None:
    """Local clusters, sample traffic, replication A->B, lakehouse build, and a summary; with --live,
    a system that keeps running until `mirrorlake demo stop` (make down)."""
    ctx.obj = {"config_path": config_path, "port": port}
    if ctx.invoked_subcommand is not None:
        return
    config = load_config(config_path)
    if live:
        from mirrorlake.live.demo import LiveDemo

        with Steps() as steps:
            LiveDemo(config_path, config, port).start(steps)
        click.echo(_live_summary(config_path, port))
        return
    from mirrorlake.demo import render_summary, run_demo

    with Steps() as steps:
        summary = run_demo(config, records=records, steps=steps)
    click.echo(render_summary(summary, config))


def _live_summary(config_path: Path, port: int) -> str:
    c = f" -c {config_path}" if str(config_path) != "conf/local.yaml" else ""
    return "\n".join(
        [
            "",
            f"mirrorlake live demo: running. Dashboard: http://127.0.0.1:{port}",
            "  traffic on A (orders with bursts, transactional payments), groups demo-app and demo-batch (lagging),",
            "  replication A->B and A->C, an observer, lakehouse serve (a refresh every 10 s)",
            "",
            "Try an incident:",
            f"  .venv/bin/mirrorlake demo{c} incident stop-replicator --seconds 60",
            f"  .venv/bin/mirrorlake demo{c} incident kill-source --seconds 30",
            f"  .venv/bin/mirrorlake failover{c} plan --flow 'A->B'",
            f"Stop it all: make down   (or .venv/bin/mirrorlake demo{c} stop, then clusters down)",
        ]
    )


def _live(ctx: click.Context):  # noqa: ANN202 - LiveDemo, imported late
    from mirrorlake.live.demo import LiveDemo

    path = ctx.obj["config_path"]
    return LiveDemo(path, load_config(path), ctx.obj["port"])


@demo.command("stop")
@click.pass_context
def stop_cmd(ctx: click.Context) -> None:
    """Stop the live demo's processes (the clusters keep running: `mirrorlake clusters down`)."""
    stopped = _live(ctx).stop()
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "no part of the live demo was running")


@demo.command("status")
@click.pass_context
def status_cmd(ctx: click.Context) -> None:
    """Which parts of the live demo run (exit 1 if one does not)."""
    running = _live(ctx).running()
    for name, pid in running.items():
        click.echo(f"{name:<11} {'pid ' + str(pid) if pid else 'not running'}")
    if not all(running.values()):
        raise SystemExit(1)


@demo.group("incident")
def incident() -> None:
    """An incident on the live demo, as an operator meets one."""


@incident.command("stop-replicator")
@click.option("--seconds", type=click.FloatRange(1, 3600), default=60, show_default=True)
@click.pass_context
def stop_replicator_cmd(ctx: click.Context, seconds: float) -> None:
    """Stop the replicator for a while (records keep arriving), then start it again."""
    _live(ctx).stop_replicator(seconds, click.echo)


@incident.command("kill-source")
@click.option("--seconds", type=click.FloatRange(1, 3600), default=30, show_default=True)
@click.pass_context
def kill_source_cmd(ctx: click.Context, seconds: float) -> None:
    """SIGKILL the source cluster's broker, start it again after a while."""
    _live(ctx).kill_source(seconds, click.echo)


@demo.command("traffic", hidden=True)
@click.pass_context
def traffic_cmd(ctx: click.Context) -> None:
    """The live demo's traffic on the first flow's source, until SIGTERM (its background process)."""
    from mirrorlake.live.traffic import LiveTraffic, TrafficSettings

    live = _live(ctx)
    stop = threading.Event()
    traffic = LiveTraffic(live.config.cluster(live.source).bootstrap_servers, TrafficSettings(), stop)
    with stopping_on_signals(stop.set, grace_s=30, what="demo traffic"):
        traffic.run()
    if traffic.failed:
        raise ReplicationError(f"demo traffic: {', '.join(traffic.failed)} stopped on an error (see the log)")
