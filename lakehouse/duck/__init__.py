"""Small incremental gold builds without the JVM: DuckDB computes a touched key's tail over Arrow,
delta-rs reads the pinned Delta versions and commits the MERGE.

Why a second engine: an incremental build of a few touched keys is a handful of small jobs per
table, and on Spark each small job and each MERGE costs a second or more whatever the data
(``bench.delta_floor``; ``bench.delta_rs_floor`` measured delta-rs's MERGE 81x cheaper). A table
with a twin here (``lakehouse.duck.tables.TWINS``) is updated by it when its build is incremental;
full builds, and tables without a twin, stay on Spark. The twin's contract is the Spark table's:
its rows, with the rows the table already holds before each key's tail start, are the rows a full
Spark build gives, which the incremental-equals-full tests hold it to.
"""
