"""Notebook-style questions over a built lakehouse, with pandas and Arrow (DuckDB underneath, no Spark).

Each cell below is what one would type in a notebook: list the tables, look at a flow's offset
mapping, translate a group, and ask what a failover now would cost.
"""

from __future__ import annotations

import argparse

from lakehouse.api import Lakehouse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("lakehouse", help="the lakehouse root (lakehouse.path of the config)")
    parser.add_argument("--flow", default="A->B")
    args = parser.parse_args(argv)

    lake = Lakehouse.at(args.lakehouse)
    print("tables:", ", ".join(lake.tables()))

    mapping = lake.table("offset_mapping").to_pandas()  # Arrow -> pandas
    mapping = mapping[mapping["flow"] == args.flow]
    per_partition = mapping.groupby(["source_topic", "partition"]).agg(
        segments=("delta", "size"), copied_upstream=("upstream_end", "max")
    )
    print("offset mapping per partition:")
    print(per_partition.to_string())

    groups = lake.query(
        'SELECT "group", source_topic, partition, committed_offset, translated_offset, method '
        "FROM group_offsets WHERE flow = ? ORDER BY 1, 2, 3",
        [args.flow],
    )
    print(f"groups on {args.flow}: {groups['group'].nunique()}")
    print(groups.to_string(index=False))

    cost = lake.query("SELECT * FROM failover_now(?)", [args.flow])
    if not cost.empty:
        lost, reread = int(cost["records_lost"].sum()), int(cost["records_reread"].sum())
        print(f"failover now: {lost} records lost, {reread} re-read")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
