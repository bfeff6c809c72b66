"""The ``mirrorlake`` command: parses arguments and calls the packages' libraries, nothing more.

Every ``MirrorlakeError`` becomes one ``error: ...`` line on stderr and its exit code; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import sys
import threading
from pathlib import Path

import click

from mirrorlake.cli_mm2 import takeover_mm2
from mirrorlake.cli_options import config_argument_or_option, config_option, pick_config, stale_after_option
from mirrorlake.progress import Steps
from mirrorlake.stopping import stopping_on_signals
from replicator.config import MirrorlakeConfig, load_config
from replicator.errors import ConfigError, ExitCode, MirrorlakeError, PortInUseError, TranslationError
from replicator.text import ERROR_LIMIT, printable

__all__ = ["main", "cli"]

_log = logging.getLogger("mirrorlake")
_FINAL_ROUND_S = 30.0  # after a stop is asked: a last round of state tasks, commits, closing clients


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="more logging (-vv for debug)")
def cli(verbose: int) -> None:
    """Kafka cross-cluster replication with its state in a Delta lakehouse."""
    level = logging.WARNING - 10 * verbose if verbose else logging.INFO
    logging.basicConfig(level=max(level, logging.DEBUG), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if verbose < 2:
        for noisy in ("py4j", "replicator.librdkafka", "replicator.kafka.connectivity.librdkafka"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


# -- clusters ---------------------------------------------------------------------------------
@cli.group()
def clusters() -> None:
    """Local single-node KRaft clusters for every 127.0.0.1 cluster of the config."""


@clusters.command("up")
@config_option
def clusters_up(config_path: Path) -> None:
    """Resolve Kafka's jars, start the brokers, wait until each answers."""
    from mirrorlake.localkafka import up

    for broker in up(load_config(config_path)):
        click.echo(f"{broker.alias}: {broker.bootstrap} ready (pid {broker.pid()})")


@clusters.command("down")
@config_option
def clusters_down(config_path: Path) -> None:
    """Stop the local brokers (by PID)."""
    from mirrorlake.localkafka import down

    down(load_config(config_path))
    click.echo("local clusters stopped")


@clusters.command("status")
@config_option
def clusters_status(config_path: Path) -> None:
    """Which local brokers run and answer metadata requests; exit 1 if any does not."""
    from mirrorlake.localkafka import status

    rows = status(load_config(config_path))
    for s in rows:
        state = "ready" if s.ready and s.running else "running, not ready" if s.running else "stopped"
        if s.ready and not s.running:
            state = "answered by another process"
        click.echo(f"{s.alias}: {s.bootstrap} {state}" + (f" (pid {s.pid})" if s.pid else ""))
    if not all(s.running and s.ready for s in rows):
        sys.exit(ExitCode.FAILED)


# -- replication ------------------------------------------------------------------------------
@cli.command()
@config_argument_or_option
@click.option("--flow", "flows", multiple=True, help="run only this flow (A->B); repeatable")
@click.option("--clusters", "targets", multiple=True, help="run only the flows that target this cluster")
@click.option("--until-caught-up", is_flag=True, help="stop once every flow has copied all it can see")
@click.option(
    "--status-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="serve /metrics and /health here (default: config)",
)
@click.option(
    "--status-host",
    envvar="MIRRORLAKE_STATUS_HOST",
    default=None,
    help="the address /metrics and /health bind to (default: config's status_host, 127.0.0.1); 0.0.0.0 in a pod",
)
@click.option(
    "--replicator-id",
    envvar="MIRRORLAKE_REPLICATOR_ID",
    default=None,
    help="this process's id (default: config's replicator_id, else host-pid); exactly-once flows run by "
    "several processes need one per process, stable across its restarts (a StatefulSet pod's name)",
)
def replicate(
    positional_config: Path | None,
    option_config: Path | None,
    flows: tuple[str, ...],
    targets: tuple[str, ...],
    until_caught_up: bool,
    status_port: int | None,
    status_host: str | None,
    replicator_id: str | None,
) -> None:
    """Run the enabled flows of CONFIG until SIGTERM/SIGINT (then drain and commit)."""
    config_path = pick_config(positional_config, option_config)
    from replicator.flow.gc_tuning import tune_for_copying
    from replicator.flow.runtime import Replicator

    config = load_config(config_path)
    if replicator_id is not None:
        if not replicator_id.strip():
            raise ConfigError("--replicator-id (or MIRRORLAKE_REPLICATOR_ID) is empty: name this process")
        config = config.model_copy(update={"replicator_id": replicator_id})
    if status_host is not None:
        config = config.model_copy(update={"status_host": status_host})
    try:  # the checks across keys (policy class, cycles, flows selected) name the file too
        replicator = Replicator(
            config,
            flows=list(flows) or None,
            target_clusters=list(targets) or None,
            status_port="config" if status_port is None else status_port,
        )
    except ConfigError as exc:
        raise ConfigError(f"{config_path}: {exc}") from None
    # the flows' stop budget bounds their drain; the tasks' final round and the commits come after it
    grace = config.stop_timeout_seconds + _FINAL_ROUND_S
    with stopping_on_signals(replicator.stop, grace_s=grace, what="replicate"):
        tune_for_copying()  # this process copies records: see replicator.flow.gc_tuning
        replicator.start(until_caught_up=until_caught_up)
        with Steps(rich=None if until_caught_up else False) as steps:
            while replicator.alive:
                replicator.wait(timeout=0.5)
                if until_caught_up:  # records copied and remaining per flow
                    for name, stats in replicator.flow_stats().items():
                        steps.counts(f"{name} records", stats.records, sum(stats.lag.values()))
        done = replicator.wait()
    for name, stats in done.items():
        click.echo(f"{name}: {stats.records} records, {stats.bytes} bytes, {stats.syncs} offset syncs")


@cli.command()
@config_option
@click.option("--flow", "flow", required=True, help="the flow the group fails over along (A->B)")
@click.option("--group", default=None, help="the consumer group (its latest checkpoints)")
@click.option(
    "--offsets",
    "offsets",
    default=None,
    help="offsets an application stored itself: a file, or - for stdin (JSON lines, Spark's JSON, Kafka's CSV)",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def translate(config_path: Path, flow: str, group: str | None, offsets: str | None, fmt: str) -> None:
    """Where GROUP, or the application that stored --offsets itself, resumes on the flow's target."""
    from replicator.access.permissions import naming_missing_acls

    if (group is None) == (offsets is None):
        raise click.UsageError("give one of --group or --offsets")
    config = load_config(config_path)
    with naming_missing_acls(config, [config.flow(flow)], "translate"):
        if offsets is not None:
            _translate_stored(config, flow, offsets, fmt)
        else:
            _translate_group(config, flow, str(group), fmt)


def _translate_group(config: MirrorlakeConfig, flow: str, group: str, fmt: str) -> None:
    from replicator.client.translation import translate_offsets

    checkpoints = translate_offsets(config, flow, group)
    rows = [
        {
            "topic": topic,
            "partition": partition,
            "offset": c.downstream_offset,
            "source_topic": c.source_topic,
            "source_offset": c.upstream_offset,
            "method": c.method,
            "error_bound": c.error_bound,
            "checkpointed_at_ms": c.emitted_at_ms,
        }
        for (topic, partition), c in sorted(checkpoints.items())
    ]
    if fmt == "json":
        click.echo(json.dumps({"flow": flow, "group": group, "offsets": rows}, indent=2))
        return
    click.echo(f"{'topic':30} {'partition':>9} {'offset':>12} {'source offset':>13}  method")
    for r in rows:
        row = f"{r['topic']:30} {r['partition']:>9} {r['offset']:>12} {r['source_offset']:>13}  {r['method']}"
        click.echo(printable(row))


def _translate_stored(config: MirrorlakeConfig, flow: str, offsets: str, fmt: str) -> None:
    """Stored positions in; the exact target positions and each one's cost out (``translate_positions``)."""
    from replicator.failover import parse_positions, translate_positions

    where = "stdin" if offsets == "-" else offsets
    try:
        text = sys.stdin.read() if offsets == "-" else Path(offsets).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TranslationError(f"cannot read offsets from {where}: {exc}") from exc
    from mirrorlake.cli_failover import echo_positions

    rows = translate_positions(config, flow, parse_positions(text, where)).partitions
    echo_positions(rows, fmt, {"flow": flow})


@cli.command()
@config_argument_or_option
@click.option("--flow", "flows", multiple=True, help="observe only this flow (A->B); repeatable")
@click.option(
    "--follow",
    is_flag=True,
    help="keep observing, every --interval, each flow none of whose replicators runs, until SIGTERM/SIGINT",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="--follow: seconds between rounds",
)
@stale_after_option
def observe(
    positional_config: Path | None,
    option_config: Path | None,
    flows: tuple[str, ...],
    follow: bool,
    interval: float,
    stale_after: float,
) -> None:
    """Emit each flow's watermarks, config snapshots, audits and checkpoints once, copying nothing.

    With ``--follow``: keep the RPO figures live while replicators are down (beside them, in a
    process of its own); a flow whose replicator runs is left to it."""
    config_path = pick_config(positional_config, option_config)
    from replicator.access.permissions import naming_missing_acls
    from replicator.tasks.observe import observe_once

    config = load_config(config_path)
    selected = config.selected_flows(flows)
    if follow:
        from replicator.failover.watch import keep_observing

        stop = threading.Event()
        with (
            stopping_on_signals(stop.set, grace_s=_FINAL_ROUND_S, what="observe"),
            naming_missing_acls(config, selected, "observe"),
        ):
            rounds = keep_observing(config, stop, list(flows) or None, interval_s=interval, stale_after_s=stale_after)
        click.echo(f"observe stopped after {rounds} rounds")
        return
    with naming_missing_acls(config, selected, "observe"):
        observed = observe_once(config, list(flows) or None)
    for flow, errors in observed.items():
        click.echo(f"{flow}: observed" + (f"; task errors: {errors}" if errors else ""))
        if errors:
            raise SystemExit(ExitCode.FAILED)


@cli.command("import-mm2")
@config_argument_or_option
@click.option("--flow", "flows", multiple=True, help="import only this flow (A->B); repeatable")
@click.option("--follow", is_flag=True, help="keep importing until SIGTERM/SIGINT (default: stop when caught up)")
def import_mm2(
    positional_config: Path | None, option_config: Path | None, flows: tuple[str, ...], follow: bool
) -> None:
    """Republish MirrorMaker 2's offset syncs, checkpoints and heartbeats as mirrorlake events."""
    config_path = pick_config(positional_config, option_config)
    from replicator.access.permissions import naming_missing_acls
    from replicator.mm2.importer import import_mm2 as run_import

    stop = threading.Event()
    config = load_config(config_path)
    selected = config.selected_flows(flows)
    with (
        stopping_on_signals(stop.set, grace_s=_FINAL_ROUND_S, what="import-mm2"),
        naming_missing_acls(config, selected, "import-mm2"),
    ):
        imported = run_import(config, flows=list(flows) or None, follow=follow, stop=stop)
    for s in imported:
        click.echo(
            f"{s.flow}: imported {s.offset_syncs} offset syncs, {s.checkpoints} checkpoints, {s.heartbeats} "
            f"heartbeats; skipped {s.skipped} of other flows, {s.bad} undecodable"
        )
        click.echo(f"  read: {', '.join(s.topics) or 'no MM2 topic of this flow exists'}")
        for bad in s.bad_records:
            click.echo(f"  undecodable: {bad.cluster}:{bad.topic}[{bad.partition}]@{bad.offset}: {bad.reason}")


cli.add_command(takeover_mm2)


# -- lakehouse --------------------------------------------------------------------------------
@cli.group()
def lakehouse() -> None:
    """Build and query the Delta lakehouse of replication state."""


@lakehouse.command("build")
@config_option
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="seconds to wait while another build, serve or maintain writes the lakehouse",
)
@click.option(
    "--full", is_flag=True, help="recompute every gold table from all of silver (default: MERGE what changed)"
)
def lakehouse_build(config_path: Path, full: bool, wait: float) -> None:
    """Ingest the state topics (availableNow), update silver, then gold (incrementally unless --full)."""
    from ingest.paths import LakehousePaths, ensure_writable_root
    from ingest.spark import spark_session
    from lakehouse.build import build_lakehouse, check_delta_logs
    from lakehouse.lease import writer_lease

    config = load_config(config_path)
    paths = LakehousePaths.of(config.lakehouse)
    ensure_writable_root(paths.root)  # before Spark starts
    check_delta_logs(paths)
    with writer_lease(paths.root, "lakehouse build", wait_s=wait), Steps() as steps:
        steps.stage("start Spark")
        spark = spark_session(config.spark)
        report = build_lakehouse(spark, config, full=full, on_stage=steps.stage, lease=False)
    click.echo(
        f"bronze rows: {report.bronze_rows}, quarantined: {report.quarantined}, "
        f"offset syncs: {report.offset_syncs}, mapping segments: {report.mapping_segments}"
    )
    click.echo(
        "gold: "
        + ", ".join(
            f"{u.table} {u.mode}{' on duckdb' * (u.engine == 'duckdb')} ({report.gold_rows[u.table]} rows)"
            for u in report.gold_updates
        )
    )


@lakehouse.command("maintain")
@config_option
@click.option(
    "--retention-hours", type=click.FloatRange(min=0), default=168.0, show_default=True, help="VACUUM retention"
)
@click.option("--force-unsafe-retention", is_flag=True, help="allow a retention below Delta's safe 168 h")
def lakehouse_maintain(config_path: Path, retention_hours: float, force_unsafe_retention: bool) -> None:
    """OPTIMIZE (compact small files) and VACUUM every lakehouse table."""
    from ingest.paths import LakehousePaths
    from ingest.spark import spark_session
    from lakehouse.maintain import check_retention, maintain

    config = load_config(config_path)
    check_retention(retention_hours, force_unsafe_retention=force_unsafe_retention)  # before Spark starts
    report = maintain(
        spark_session(config.spark),
        LakehousePaths.of(config.lakehouse),
        retention_hours=retention_hours,
        force_unsafe_retention=force_unsafe_retention,
    )
    for t in report.tables:
        click.echo(f"{t.table}: {t.files_before} -> {t.files_after} files (version {t.version})")


@lakehouse.command("serve")
@config_option
@click.option(
    "--interval",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="seconds from the start of one silver+gold refresh to the next (a longer one is followed at once)",
)
@click.option(
    "--bronze",
    type=click.Choice(["kafka", "spark"]),
    default="kafka",
    show_default=True,
    help="how bronze is ingested: kafka (a consumer and a delta-rs append at each refresh) or spark (streams)",
)
@click.option(
    "--trigger", type=click.FloatRange(min=0.1), default=5.0, show_default=True, help="--bronze spark's trigger (s)"
)
def lakehouse_serve(config_path: Path, interval: float, bronze: str, trigger: float) -> None:
    """Ingest continuously and rebuild silver and gold every --interval seconds until SIGTERM/Ctrl-C."""
    from ingest.paths import LakehousePaths, ensure_writable_root
    from ingest.spark import spark_session
    from lakehouse.serve import LakehouseService, ServeSettings

    config = load_config(config_path)
    ensure_writable_root(LakehousePaths.of(config.lakehouse).root)  # before Spark starts
    service = LakehouseService(spark_session(config.spark), config, ServeSettings(interval, trigger, bronze=bronze))  # type: ignore[arg-type]  # a Choice
    with stopping_on_signals(service.stop, grace_s=_FINAL_ROUND_S, what="lakehouse serve"):  # Delta commits atomically
        refreshes = service.run()
    click.echo(f"lakehouse serve stopped after {refreshes} refreshes")


@cli.command()
@click.argument("query")
@config_option
@click.option(
    "--lakehouse", "lakehouse_path", help="lakehouse root, a directory or s3://bucket/prefix (overrides config)"
)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--as-of", "as_of", default=None, help="read the tables as of a VERSION or an ISO TIMESTAMP (UTC)")
@click.option(
    "--unrestricted",
    is_flag=True,
    help="DuckDB's full access: any statement, files anywhere, extensions (default: one SELECT over the lakehouse)",
)
def sql(
    query: str, config_path: Path, lakehouse_path: str | None, fmt: str, as_of: str | None, unrestricted: bool
) -> None:
    """Run a DuckDB SQL QUERY over the lakehouse tables: a view per bronze/silver/gold table, and the
    macros translate_offset(flow, topic, partition, offset), translate_group(flow, group),
    rpo_now(flow), failover_now(flow). One SELECT, reading the lakehouse and nothing else, unless
    --unrestricted."""
    from click.core import ParameterSource

    from ingest.paths import LakehousePaths
    from lakehouse.sql import LakehouseSQL, format_result, parse_as_of
    from replicator.config.model import LakehouseConfig

    moment = parse_as_of(as_of) if as_of is not None else None
    if lakehouse_path is None:
        lakehouse = load_config(config_path).lakehouse
    elif click.get_current_context().get_parameter_source("config_path") == ParameterSource.DEFAULT:
        lakehouse = LakehouseConfig().at(lakehouse_path)  # an s3:// root then: the AWS environment's access
    else:  # --config's s3 settings say how to reach an s3:// root
        lakehouse = load_config(config_path).lakehouse.at(lakehouse_path)
    con = LakehouseSQL(LakehousePaths.of(lakehouse).root, as_of=moment, unrestricted=unrestricted)
    try:
        text = format_result(con.query(query), fmt)  # type: ignore[arg-type]
        click.echo(text.removesuffix("\n"))  # CSV ends its last row already: no empty line after it
    finally:
        con.close()


@cli.command()
@config_option
@click.option("--port", type=click.IntRange(1, 65535), default=8501, show_default=True, help="the port to serve on")
@click.option(
    "--address",
    envvar="MIRRORLAKE_DASHBOARD_ADDRESS",
    default="127.0.0.1",
    show_default=True,
    help="the address to bind (0.0.0.0 in a pod, behind its Service)",
)
def dashboard(config_path: Path, port: int, address: str) -> None:
    """Serve the Streamlit dashboard (on 127.0.0.1 unless --address says otherwise)."""
    from dashboards.serve import serve
    from mirrorlake.localkafka.ports import port_free

    config = load_config(config_path)
    if not port_free(port):
        raise PortInUseError(
            f"dashboard: port {port} on 127.0.0.1 is already in use by another process "
            "(a dashboard already running?); stop it or pick another with --port"
        )
    serve(config_path, config, port=port, address=address)


def _register() -> None:
    from mirrorlake.cli_check import check
    from mirrorlake.cli_demo import demo
    from mirrorlake.cli_failover import failback, failover

    cli.add_command(config_argument_or_option(check))
    cli.add_command(config_option(demo))
    for group in (failover, failback):
        for command in group.commands.values():
            config_option(command)
        cli.add_command(group)


_register()


def _error(message: str) -> None:
    """The one ``error:`` line: names and values in it may come from a cluster or the command line."""
    click.echo(f"error: {printable(message, limit=ERROR_LIMIT)}", err=True)


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except click.UsageError as exc:  # one line, as every error: what is wrong, then where to look
        where = exc.ctx.command_path if exc.ctx is not None else "mirrorlake"
        _error(f"{exc.format_message()} (see '{where} --help')")
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        _error(exc.format_message())
        sys.exit(exc.exit_code)
    except MirrorlakeError as exc:
        _error(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(ExitCode.INTERRUPTED)


def entry() -> None:
    """The process entry point (``mirrorlake``, ``python -m mirrorlake.cli``): ``main`` with a native
    crash reported and a failure's exit code kept.

    A flow that failed may leave librdkafka handles in a fatal state (a transactional producer the
    broker refused, say). Destroying them is left to interpreter teardown, where a crash (SIGSEGV)
    would replace the documented exit code a supervisor acts on. By then the error has been reported
    and everything the flows must keep is durable (they commit only what a durable sync covers), so
    a failing process ends with ``os._exit`` after flushing its output, without tearing down the
    clients. A success exits normally. ``faulthandler`` prints every thread's stack on a native crash.
    """
    faulthandler.enable()
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitCode.FAILED)
        if code == 0:
            raise
        if not isinstance(exc.code, int):
            click.echo(str(exc.code), err=True)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))


if __name__ == "__main__":
    entry()
