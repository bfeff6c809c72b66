"""``mirrorlake failover plan|apply|spark-checkpoint`` and ``mirrorlake failback plan``: the command-line face of
``replicator.failover``. ``mirrorlake.cli`` registers both groups and gives every command its
``--config`` option (so this module never imports the CLI back)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from mirrorlake.cli_options import stale_after_option
from replicator.config import load_config
from replicator.text import printable

__all__ = ["failover", "failback"]

_FORMAT = click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)


def _common(func: Any) -> Any:
    options = [
        click.option("--flow", required=True, help="the flow to fail over (A->B): its target takes over"),
        click.option("--groups", default=None, help="regex (full match) of the groups to move (default: all)"),
        click.option("--at", "at", default=None, help="resume at a time: ISO 8601 (UTC if no zone) or epoch ms"),
        stale_after_option,
        _FORMAT,
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.group()
def failover() -> None:
    """Plan and apply a failover of a flow to its target (works with the source down)."""


@failover.command("plan")
@_common
def plan_cmd(config_path: Path, flow: str, groups: str | None, at: str | None, stale_after: float, fmt: str) -> None:
    """Per group and partition: where it resumes on the target, records lost / re-read, what was
    never replicated, and the consistent cut. Reads only the target cluster; writes nothing."""
    from replicator.access.permissions import naming_missing_acls
    from replicator.failover import parse_time, plan_failover

    at_ms = parse_time(at) if at is not None else None
    config = load_config(config_path)
    with naming_missing_acls(config, [config.flow(flow)], "failover"):
        plan = plan_failover(config, flow, groups=groups, at_ms=at_ms, stale_after_s=stale_after)
    if fmt == "json":
        click.echo(json.dumps(_plan_json(plan), indent=2))
    else:
        _echo_plan(plan)


@failover.command("apply")
@_common
@click.option("--planned", is_flag=True, help="wait for 0 lag and current checkpoints; move only exact groups")
@click.option("--stop-replication", is_flag=True, help="ask running replicators of the flow to stop, then go on")
@click.option(
    "--move-consumers", is_flag=True, help="first ask the groups' FailoverConsumers on the source to commit and leave"
)
@click.option(
    "--fence",
    is_flag=True,
    help="with --planned: DENY Write on the source topics, settle, catch up, stop replication, move (resumable)",
)
@click.option(
    "--settle",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="--fence: seconds the fenced topics must stay still",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="--planned/--stop-replication wait (s)",
)
def apply_cmd(
    config_path: Path,
    flow: str,
    groups: str | None,
    at: str | None,
    stale_after: float,
    fmt: str,
    planned: bool,
    stop_replication: bool,
    move_consumers: bool,
    fence: bool,
    settle: float,
    timeout: float,
) -> None:
    """The plan, then: refuse while the flow runs (or stop it: --stop-replication), write offsets on
    the target for groups with no members there (a group_sync event each), record a failover event.
    A rerun is a no-op. --planned --fence: the fenced cutover, a rerun goes on after its last step."""
    from replicator.access.permissions import naming_missing_acls
    from replicator.errors import FailoverError
    from replicator.failover import apply_failover, parse_time

    if fence and not planned:
        raise FailoverError("failover apply: --fence is a step of a planned cutover: add --planned")
    if fence and (at is not None or stop_replication):
        raise FailoverError("failover apply --fence: the cutover stops replication and moves at 0 lag; "
                            "drop --at and --stop-replication")  # fmt: skip
    at_ms = parse_time(at) if at is not None else None
    config = load_config(config_path)
    if fence:
        _cutover(config, flow, groups, settle, timeout, stale_after, move_consumers, fmt)
        return
    with naming_missing_acls(config, [config.flow(flow)], "failover"):
        result = apply_failover(
            config,
            flow,
            groups=groups,
            at_ms=at_ms,
            planned=planned,
            stop_replication=stop_replication,
            move_consumers=move_consumers,
            timeout_s=timeout,
            stale_after_s=stale_after,
        )
    if fmt == "json":
        out = {
            "plan": _plan_json(result.plan),
            "groups": [asdict(g) for g in result.groups],
            "failover_event_id": result.event.event_id if result.event else None,
        }
        click.echo(json.dumps(out, indent=2))
        return
    _echo_plan(result.plan)
    _row("")
    _echo_groups(result.groups)
    if result.event is None:
        _row("nothing moved: no failover event written")
    else:
        _row(f"failover event {result.event.event_id} written ({', '.join(result.event.groups)})")


def _row(text: str = "", *, err: bool = False) -> None:
    """One line of a table or a report: names in it came from a cluster (``replicator.text.printable``)."""
    click.echo(printable(text), err=err)


def _plan_json(plan: Any) -> dict[str, Any]:
    out = asdict(plan)
    out["records_unreplicated"] = plan.records_unreplicated
    out["bytes_unreplicated"] = plan.bytes_unreplicated
    out["seconds_unreplicated"] = plan.seconds_unreplicated
    out["records_deleted_on_target"] = plan.records_deleted_on_target
    out["records_compacted_on_target"] = plan.records_compacted_on_target
    for g, data in zip(plan.groups, out["groups"], strict=True):
        data["active_on_target"] = g.active_on_target
    return out


_POSITION_FIELDS = (
    "source_topic", "partition", "committed_offset", "target_topic", "target_offset", "method", "records_lost",
    "records_reread", "records_duplicated", "records_unreplicated", "unmapped_copies", "copies_presumed", "lost_cause",
)  # fmt: skip


def echo_positions(rows: Any, fmt: str, head: dict[str, Any]) -> None:
    """Stored positions and where each resumes on the target (``translate_positions``' rows)."""
    if fmt == "json":
        found = [{f: getattr(r, f) for f in _POSITION_FIELDS} for r in rows]
        click.echo(json.dumps({**head, "positions": found}, indent=2))
        return
    _row(f"{'source topic':24} {'part':>4} {'stored':>10} -> {'target topic':26} {'offset':>10}  "
         f"{'method':22} {'lost':>6} {'re-read':>7} {'dup':>5} {'unrepl':>7}")  # fmt: skip
    for r in rows:
        figures = [
            "-" if v is None else str(v)
            for v in (r.target_offset, r.records_lost, r.records_reread, r.records_duplicated, r.records_unreplicated)
        ]
        _row(f"{r.source_topic:24} {r.partition:>4} {r.committed_offset:>10} -> {r.target_topic:26} {figures[0]:>10}  "
             f"{r.method:22} {figures[1]:>6} {figures[2]:>7} {figures[3]:>5} {figures[4]:>7}")  # fmt: skip
    presumed = sum(1 for r in rows if r.copies_presumed)
    if presumed:
        _row(f"the source did not answer: {presumed} row(s) presume that the copies past the last mapped one "
             "hold the next source offsets (unmapped_copies in --format json)")  # fmt: skip


def _n(value: Any) -> str:
    return "?" if value is None else str(value)


def _echo_plan(plan: Any) -> None:
    from replicator.failover.times import format_time

    _row(f"failover plan {plan.flow}: {plan.target_cluster} takes over from {plan.source_cluster}")
    _row(
        f"  as of {format_time(plan.planned_at_ms)}"
        + (f", resuming at {format_time(plan.at_ms)}" if plan.at_ms is not None else "")
    )
    running = "; ".join(plan.running_replicators) or "none"
    _row(f"  replicators still running: {running}")
    _row(
        f"  not replicated at the last observation: {_n(plan.records_unreplicated)} records, "
        f"{_n(plan.bytes_unreplicated)} bytes, oldest {_n(plan.seconds_unreplicated)} s"
    )
    _row(f"  consistent cut: {format_time(plan.consistent_cut_ms)}")
    for p in plan.partitions:
        if p.deleted_on_target:
            _row(
                f"  {p.source_topic}[{p.partition}]: {p.deleted_on_target} replicated records deleted from the "
                f"target by retention/deletion (target offsets {p.deleted_target_range}, source offsets "
                f"{p.deleted_source_range}): lost on failover"
            )
        if p.compacted_on_target:
            _row(
                f"  {p.source_topic}[{p.partition}]: {p.compacted_on_target} replicated records removed from "
                f"{p.target_topic} by compaction (cleanup.policy=compact): lost on failover"
            )
    _row("")
    _row(f"  {'source topic':30} {'part':>4} {'records':>8} {'bytes':>10} {'seconds':>8}  exact  observed")
    for p in plan.partitions:
        _row(
            f"  {p.source_topic:30} {p.partition:>4} {_n(p.records):>8} {_n(p.bytes):>10} {_n(p.seconds):>8}  "
            f"{'yes' if p.exact else 'no ':5}  {format_time(p.observed_at_ms)}"
        )
    for g in plan.groups:
        state = f"ACTIVE on {plan.target_cluster} ({g.members_on_target} members)" if g.active_on_target else "inactive"
        _row("")
        _row(
            f"group {g.group}: {state}; lost {g.total('records_lost')}, re-read {g.total('records_reread')}, "
            f"unreplicated {g.total('records_unreplicated')}, re-read at the cut {g.total('reread_at_cut')}"
        )
        _row(
            f"  {'target topic':30} {'part':>4} {'committed':>10} {'resume at':>10} {'method':>16} "
            f"{'lost':>6} {'reread':>6} {'dup':>5} {'unrepl':>7} {'exact at':>9}"
        )
        for r in g.partitions:
            _row(
                f"  {r.target_topic:30} {r.partition:>4} {r.committed_offset:>10} {_n(r.target_offset):>10} "
                f"{r.method:>16} {_n(r.records_lost):>6} {_n(r.records_reread):>6} {_n(r.records_duplicated):>5} "
                f"{_n(r.records_unreplicated):>7} {_n(r.exact_offset):>9}"
            )
            gone = {"retention/deletion": r.records_deleted_on_target, "compaction": r.records_compacted_on_target}
            if r.lost_cause:
                counts = ", ".join(f"{n} by {why}" for why, n in gone.items() if n)
                _row(f"    of the lost records: {counts} ({r.lost_cause})")


@failover.command("spark-checkpoint")
@click.option("--flow", required=True, help="the flow to fail over (A->B): its target takes over")
@click.option("--checkpoint", "checkpoint", required=True, type=click.Path(path_type=Path),
              help="the streaming query's checkpoint directory (stopped)")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="print the translated positions; write nothing")
@click.option("--force", is_flag=True, help="set aside a batch not committed (the query is stopped, not running)")
@_FORMAT
def spark_checkpoint_cmd(config_path: Path, flow: str, checkpoint: Path, dry_run: bool, force: bool, fmt: str) -> None:
    """Move a Spark Structured Streaming query's Kafka positions to the flow's target: its newest committed
    batch's offsets, translated exactly, rewritten in place (the original kept beside them). Restart the
    query against the target cluster, subscribed to the remote topics."""
    from replicator.access.permissions import naming_missing_acls
    from replicator.failover.spark_checkpoint import rewrite_checkpoint

    config = load_config(config_path)
    with naming_missing_acls(config, [config.flow(flow)], "translate"):
        done = rewrite_checkpoint(config, flow, checkpoint, dry_run=dry_run, force=force)
    head = {"flow": flow, "checkpoint": str(checkpoint), "batch": done.batch, "set_aside": list(done.set_aside),
            "written": done.written}  # fmt: skip
    echo_positions(done.rows, fmt, head)
    if fmt == "table":
        verb = "rewrote" if done.written else "would rewrite (dry run)"
        target = config.flow(flow).target
        _row(f"{verb} offsets/{done.batch} in {checkpoint} (the original kept as .{done.batch}.before-failover "
             f"beside it); restart the query on {target}, subscribed to the target topics")  # fmt: skip


@click.group()
def failback() -> None:
    """After a failover, once the old source is back: what never reached the target."""


@failback.command("plan")
@click.option("--flow", required=True, help="the flow that was failed over (A->B)")
@click.option("--export", "export", default=None,
              help="write the records as JSON lines (key/value base64, headers, timestamp, coordinates) to this "
                   "file, created private (0600); - for standard output (the plan then goes to stderr)")  # fmt: skip
@click.option("--force", is_flag=True, help="replace an existing --export file")
@_FORMAT
def failback_plan_cmd(flow: str, export: str | None, force: bool, fmt: str, config_path: Path) -> None:
    """Per partition, the source's records after the last copy (needs the source; changes nothing)."""
    from replicator.failover import failback_plan
    from replicator.failover.times import format_time

    rows = failback_plan(load_config(config_path), flow, export=export, force=force)
    to_stderr = export == "-"  # standard output carries the records
    if fmt == "json":
        click.echo(json.dumps([asdict(r) for r in rows], indent=2), err=to_stderr)
        return
    _row(f"  {'source topic':30} {'part':>4} {'offsets':>17} {'records':>8} {'bytes':>10}  time range", err=to_stderr)
    for r in rows:
        span = f"{r.start_offset}-{r.end_offset}"
        times = f"{format_time(r.first_timestamp_ms)} .. {format_time(r.last_timestamp_ms)}" if r.records else "-"
        earlier = f"  ({r.recovered_records} recovered earlier)" if r.recovered_records else ""
        if r.orphan_copies:
            earlier += f"  ({r.orphan_copies} copies on the target had no offset sync: not listed)"
        row = f"  {r.source_topic:30} {r.partition:>4} {span:>17} {r.records:>8} {r.bytes:>10}  {times}{earlier}"
        _row(row, err=to_stderr)
    if export is not None:
        _row(f"exported {sum(r.records for r in rows)} records to {export}", err=to_stderr)


def _echo_groups(groups: Iterable[Any]) -> None:
    """Each applied group's outcome and its partitions' decisions (``failover apply``'s rows)."""
    for g in groups:
        _row(f"group {g.group}: {g.outcome}" + (f" ({g.detail})" if g.detail else ""))
        for topic, partition, decision, before, after, why in g.decisions:
            _row(f"  {topic}[{partition}] {decision}: {before} -> {after}" + (f" ({why})" if why else ""))


def _cutover(
    config: Any, flow: str, groups: str | None, settle: float, timeout: float, stale: float, move: bool, fmt: str
) -> None:
    from replicator.access.permissions import naming_missing_acls
    from replicator.failover.cutover import fenced_cutover

    with naming_missing_acls(config, [config.flow(flow)], "cutover"):
        result = fenced_cutover(
            config, flow, groups=groups, settle_s=settle, timeout_s=timeout, stale_after_s=stale, move_consumers=move
        )
    moved = result.failover
    if fmt == "json":
        out = {
            "resumed_after": result.resumed_after,
            "steps": [{"step": e.step, "detail": e.detail, "event_id": e.event_id} for e in result.steps],
            "groups": [asdict(g) for g in moved.groups] if moved else [],
            "failover_event_id": moved.event.event_id if moved and moved.event else None,
        }
        click.echo(json.dumps(out, indent=2))
        return
    if result.resumed_after:
        _row(f"cutover of {result.flow}: resumed after step {result.resumed_after}")
    if not result.steps:
        _row(f"cutover of {result.flow}: done by an earlier run; nothing to do")
    for e in result.steps:
        _row(f"  {e.step}: {e.detail or ''}")
    _echo_groups(moved.groups if moved else ())
    if result.steps:
        lift = f"failback apply --flow {result.flow} --unfence"
        _row(f"the fence stays on {result.steps[0].source_cluster}: {lift} lifts it")


@failback.command("apply")
@click.option("--flow", required=True, help="the flow that was failed over (A->B)")
@click.option("--recover", is_flag=True, help="re-produce the never-replicated records to the target's remote topics")
@click.option("--reverse", is_flag=True, help="make the configured flow B->A start after what came from A")
@click.option("--groups", default=None, help="regex (full match) of the groups on B to move back to A")
@click.option("--unfence", is_flag=True, help="delete the DENY Write ACLs a fenced cutover left on A")
@click.option(
    "--move-consumers", is_flag=True, help="with --groups: first ask their FailoverConsumers on B to commit and leave"
)
@click.option(
    "--timeout", type=click.FloatRange(min=0), default=300.0, show_default=True, help="--move-consumers wait (s)"
)
@stale_after_option
@_FORMAT
def failback_apply_cmd(
    flow: str,
    recover: bool,
    reverse: bool,
    groups: str | None,
    unfence: bool,
    move_consumers: bool,
    timeout: float,
    stale_after: float,
    fmt: str,
    config_path: Path,
) -> None:
    """Failback steps, in this order (each needs A): --recover re-produces what `failback plan` lists
    to B; --reverse seeds the reverse flow's start positions on B; --groups moves groups back to A;
    --unfence lifts a fenced cutover's ACLs on A (also how to abandon a cutover).
    Every step is idempotent: a rerun re-produces, seeds and moves nothing twice."""
    from replicator.errors import FailoverError
    from replicator.failover import failback_groups, recover_never_replicated, seed_reverse_flow

    if not (recover or reverse or groups or unfence):
        raise FailoverError("failback apply: name at least one step (--recover, --reverse, --groups REGEX, --unfence)")
    if move_consumers and not groups:
        raise FailoverError("failback apply: --move-consumers moves the consumers of --groups: name them")
    config = load_config(config_path)
    out: dict[str, Any] = {}
    if recover:
        result = recover_never_replicated(config, flow, stale_after_s=stale_after)
        out["recover"] = {
            "ranges": [asdict(r) for r in result.ranges],
            "skipped_cycle": result.skipped_cycle,
            "failback_event_id": result.event.event_id if result.event else None,
        }
        if fmt == "table":
            _echo_recovery(result, flow)
    if reverse:
        starts = seed_reverse_flow(config, flow)
        out["reverse"] = [asdict(s) for s in starts]
        for s in starts if fmt == "table" else ():
            _row(
                f"  reverse flow start {s.topic}[{s.partition}]: {s.outcome}"
                + (f" at {s.offset}" if s.offset is not None else "")
            )
    if groups:
        moved = failback_groups(config, flow, groups=groups, move_consumers=move_consumers, timeout_s=timeout)
        out["groups"] = {
            "groups": [asdict(g) for g in moved.groups],
            "failback_event_id": moved.event.event_id if moved.event else None,
        }
        if fmt == "table":
            _echo_groups(moved.groups)
        if fmt == "table":
            _row("nothing moved" if moved.event is None else f"failback event {moved.event.event_id} written")
    if unfence:
        from replicator.failover.cutover import lift_cutover_fence

        lifted = lift_cutover_fence(config, flow)
        out["unfence"] = {"detail": lifted.detail if lifted else None, "event_id": lifted.event_id if lifted else None}
        if fmt == "table":
            _row(f"unfenced: {lifted.detail}" if lifted else f"no fence of a cutover of {flow} is up: nothing to lift")
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))


def _echo_recovery(result: Any, flow: str) -> None:
    for r in result.ranges:
        _row(
            f"  {r.source_topic}[{r.partition}] {r.start_offset}-{r.end_offset} -> {r.target_topic}: "
            f"{r.records} records, {r.bytes} bytes re-produced"
        )
    if result.skipped_cycle:
        _row(f"  {result.skipped_cycle} records came from {flow.split('->')[-1]}: not copied back")
    if result.event is None:
        _row("nothing to recover: no failback event written")
    else:
        _row(f"failback event {result.event.event_id} written ({result.event.records} records recovered)")
