"""``mirrorlake takeover-mm2``: a flow MirrorMaker 2 copied continues under mirrorlake where MM2 stopped."""

from __future__ import annotations

from pathlib import Path

import click

from replicator.config import load_config

__all__ = ["takeover_mm2"]


@click.command("takeover-mm2")
@click.argument("config_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--flow", "flow_name", required=True, help="the flow MM2 ran (A->B), with MM2's cluster aliases")
@click.option(
    "--offsets-topic", default=None, help="MM2's offset.storage.topic (default: mm2-offsets.<target>.internal)"
)
def takeover_mm2(config_path: Path, flow_name: str, offsets_topic: str | None) -> None:
    """Start FLOW's source group at MM2's last positions (stop MM2 first; existing positions are kept)."""
    from replicator.mm2.takeover import seed_from_mm2

    config = load_config(config_path)
    seeded = seed_from_mm2(config, config.flow(flow_name), offsets_topic)
    click.echo(f"{flow_name}: {len(seeded)} partitions start where MM2 stopped")
    for (topic, partition), offset in sorted(seeded.items()):
        click.echo(f"  {topic}[{partition}] at {offset}")
