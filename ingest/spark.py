"""The one place a SparkSession is made: Delta Lake, the Kafka source, and local tuning.

JVM packages come from Maven Central through Spark's ivy (``spark.jars.packages``) into a cache
(``$MIRRORLAKE_CACHE/ivy``, default ``~/.cache/mirrorlake/ivy``), matched to the installed pyspark
and delta-spark. The resolved jar list is recorded there, so later sessions pass the jars directly
(``spark.jars``) and skip ivy: quieter and faster.

Ivy resolves from Maven Central only (``spark.jars.ivySettings``: an ``ivysettings.xml`` written to
the cache with Maven Central as the one resolver; ivy's own cache in the same directory is read
first), not from Spark's default chain of local Maven/Ivy repositories and spark-packages, whose
unreachable entries and warnings scrolled past the user. While ivy resolves, the process's stdout
and stderr (which the Spark JVM started then inherits, for its lifetime) go to ``ivy/resolve.log``
in the cache; the screen gets one log line per package and one when resolution is done.

Avro bodies are decoded in the JVM by spark-avro's ``from_avro`` (``lakehouse.avro_jvm``), each
writer version resolved to the newest reader schema; records it cannot vouch for fall back to
fastavro in Arrow batches (``lakehouse.decode``). Adding a package changes the manifest's name (a
hash of the package list), so a cache whose manifest predates it resolves again once.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ingest.storage import s3_access
from replicator.config import SparkConfig
from replicator.config.cache import cache_root
from replicator.errors import DependencyResolutionError, ToolMissingError

__all__ = [
    "spark_session",
    "spark_packages",
    "reach_from_spark",
    "ivy_settings",
    "resolved_jars",
    "adopt_jars",
    "IVY_SETTINGS",
    "LOCAL_TUNING",
]

_log = logging.getLogger(__name__)

MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
IVY_SETTINGS = f"""<ivysettings>
  <!-- written by mirrorlake (ingest/spark.py): resolve Spark's packages from Maven Central only -->
  <settings defaultResolver="central"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="{MAVEN_CENTRAL}"/>
  </resolvers>
</ivysettings>
"""

# Measured on the 2-core development machine: ~2.5x faster local runs.
LOCAL_TUNING: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # in local mode the driver's heap is all of Spark's: at 1e7 events silver's aggregation ran short
    # of memory pages on 3g and spilled; 4g built 7-11% faster (``bench.driver_memory``)
    "spark.driver.memory": "4g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.databricks.delta.retentionDurationCheck.enabled": "true",
    # Every MERGE source is checkpointed or persisted first and never reads its target, so Delta
    # need not copy it again: 0.2-0.8 s less per MERGE (``bench.delta_floor``)
    "spark.databricks.delta.merge.materializeSource": "none",
}


def spark_packages() -> list[str]:
    """Maven coordinates matching the installed pyspark and delta-spark: Delta, the Kafka source, Avro."""
    spark_version = version("pyspark")
    delta_version = version("delta-spark")
    spark_mm = ".".join(spark_version.split(".")[:2])
    return [
        f"io.delta:delta-spark_{spark_mm}_2.13:{delta_version}",
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version}",
        f"org.apache.spark:spark-avro_2.13:{spark_version}",
        f"org.apache.hadoop:hadoop-aws:{_hadoop_version()}",  # s3:// lakehouses (S3A), with the AWS SDK bundle
    ]


def _hadoop_version() -> str:
    """The Hadoop version pyspark ships (its ``hadoop-client-api`` jar): hadoop-aws must match it."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    raise ToolMissingError(f"pyspark's jars ({jars}) hold no hadoop-client-api jar: a broken pyspark install")


def spark_session(config: SparkConfig | None = None, *, app_name: str = "mirrorlake"):  # -> SparkSession
    """Get or create the process's SparkSession with Delta and the Kafka source.

    ``config.master`` (default ``local[*]``) and ``config.conf`` override the local tuning, so the
    same code runs on a cluster. Raises ``ToolMissingError`` without Java and
    ``DependencyResolutionError`` when ivy cannot fetch the packages.
    """
    from pyspark.errors import PySparkRuntimeError

    config = config or SparkConfig()
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise ToolMissingError("Spark needs Java 17: install it (apt-get install openjdk-17-jre-headless)")
    # Python workers must run this interpreter (the venv with fastavro and pyarrow); pyspark reads
    # the worker executable from the environment only.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    manifest = _manifest_path()
    ivy = cache_root() / "ivy"
    log = ivy / "resolve.log"
    jars = _resolved_jars(manifest)
    try:
        if jars:
            spark = _builder(config, app_name, ivy, jars).getOrCreate()
        else:
            with _resolution_lock(ivy):  # two first starts at once would write one ivy cache together
                jars = _resolved_jars(manifest)  # resolved by the other meanwhile
                builder = _builder(config, app_name, ivy, jars)
                if jars:
                    spark = builder.getOrCreate()
                else:
                    for package in spark_packages():
                        _log.info("resolving %s from Maven Central (ivy's output: %s)", package, log)
                    started = time.monotonic()
                    with _output_to(log):
                        spark = builder.getOrCreate()
                    _log.info("Spark packages resolved into %s in %.0f s", ivy, time.monotonic() - started)
                    _record_resolved_jars(manifest, spark.sparkContext.getConf().get("spark.jars", ""))
    except PySparkRuntimeError as exc:
        raise DependencyResolutionError(
            f"Spark did not start ({exc.getErrorClass() if hasattr(exc, 'getErrorClass') else exc}). "
            f"Spark resolves {', '.join(spark_packages())} from Maven Central into "
            f"{ivy} on first use: check that Maven Central is reachable (ivy's output: {log})."
        ) from exc
    spark.sparkContext.setLogLevel(config.conf.get("spark.log.level", "WARN"))  # Spark's own conf wins if given
    _quiet_avro_serializer(spark)
    return spark


def reach_from_spark(spark: Any, root: Path) -> None:
    """Give ``spark`` the S3A settings of the store ``root`` is on (nothing for a local root).

    Set at run time on the session, not at its start, so one session (the tests', a notebook's)
    can reach a store it was not started for; every Hadoop configuration Spark makes from then on
    (Delta's log, the streaming checkpoints, the tasks') carries them."""
    access = s3_access(root)
    if access is None:
        return
    for key, value in access.spark_settings().items():
        spark.conf.set(key, value)


def _builder(config: SparkConfig, app_name: str, ivy: Path, jars: list[str]) -> Any:
    """A session builder with the Delta extension and either the resolved ``jars`` or, when there
    are none yet, the packages for ivy to resolve."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(config.master).appName(app_name)
    if jars:  # nothing written to the cache then: it may be read-only (the lakehouse image's)
        sources = {"spark.jars": ",".join(jars)}
    else:
        sources = {"spark.jars.packages": ",".join(spark_packages()), "spark.jars.ivySettings": str(ivy_settings(ivy))}
    settings = {
        **LOCAL_TUNING,
        **sources,
        "spark.jars.ivy": str(ivy),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        **config.conf,
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder


@contextmanager
def _resolution_lock(ivy: Path) -> Iterator[None]:
    """One resolving process per ivy cache at a time (an exclusive ``flock``, freed if the holder dies)."""
    ivy.mkdir(parents=True, exist_ok=True)
    with open(ivy / "resolve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _quiet_avro_serializer(spark) -> None:  # noqa: ANN001 - a SparkSession (pyspark imported lazily)
    """Silence spark-avro's warning that a nullable column meets a non-null Avro schema: the JVM
    decoder (``lakehouse.avro_jvm``) re-encodes only records it decoded, and the warning came once
    per task (hundreds per build)."""
    jvm = spark.sparkContext._jvm
    level = jvm.org.apache.logging.log4j.Level.ERROR
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel("org.apache.spark.sql.avro.AvroSerializer", level)


def ivy_settings(ivy_dir: Path) -> Path:
    """``ivy_dir/ivysettings.xml`` with Maven Central as the only resolver (written when missing or changed)."""
    path = ivy_dir / "ivysettings.xml"
    if not path.is_file() or path.read_text() != IVY_SETTINGS:
        ivy_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(IVY_SETTINGS)
        tmp.replace(path)
    return path


@contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """Send this process's file descriptors 1 and 2 to ``log`` for the block (a JVM started then keeps them)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log, "ab") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)


def _manifest_path() -> Path:
    key = hashlib.sha256(",".join(spark_packages()).encode()).hexdigest()[:16]
    return cache_root() / "ivy" / f"resolved-{key}.txt"


def _resolved_jars(manifest: Path) -> list[str]:
    """The jar files ivy resolved for these packages before, if all still exist (no ivy run then)."""
    if not manifest.is_file():
        return []
    jars = [line for line in manifest.read_text().splitlines() if line]
    if not jars or not all(Path(j).is_file() for j in jars):
        return []
    return jars


def resolved_jars() -> list[Path]:
    """The jar files of ``spark_packages()`` and their dependencies that the cache holds ([]: not resolved
    yet, or a file gone): what an image that must not reach Maven Central ships (``adopt_jars``)."""
    return [Path(j) for j in _resolved_jars(_manifest_path())]


def adopt_jars(directory: Path) -> Path:
    """Make the jars in ``directory`` this installation's resolved packages (the cache's manifest names
    them), so ``spark_session`` starts without ivy: the lakehouse image ships its jars so. Raises
    ``DependencyResolutionError`` naming each of ``spark_packages()`` without its jar there (ivy names
    a jar ``<group>_<artifact>-<version>.jar``): jars of other versions would fail at the first query."""
    jars = sorted(directory.resolve().glob("*.jar"))
    names = {j.name for j in jars}
    missing = [p for p in spark_packages() if "{}_{}-{}.jar".format(*p.split(":")) not in names]
    if missing:
        raise DependencyResolutionError(
            f"{directory} lacks the jar of {', '.join(missing)} (it holds {len(jars)} jars): stage the jars "
            "resolved for this pyspark and delta-spark (scripts/build_image.sh lakehouse does)"
        )
    manifest = _manifest_path()
    _record_resolved_jars(manifest, ",".join(str(j) for j in jars))
    return manifest


def _record_resolved_jars(manifest: Path, spark_jars: str) -> None:
    jars = [j.removeprefix("file://") for j in spark_jars.split(",") if j]
    if jars and all(Path(j).is_file() for j in jars):
        manifest.parent.mkdir(parents=True, exist_ok=True)
        tmp = manifest.with_suffix(".tmp")
        tmp.write_text("\n".join(jars) + "\n")
        tmp.replace(manifest)
