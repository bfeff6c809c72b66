"""Where the lakehouse lives, a local directory or an S3 prefix, and how each engine reaches it.

The lakehouse root is a ``pathlib`` path either way: a ``Path``, or a ``universal-pathlib``
``UPath`` over ``s3fs`` that carries the store's endpoint and credentials, so the few places that
list or read small files (Delta logs, gold watermarks) need no second code path. The three engines
get the same store in their own terms from ``S3Access``: Spark's S3A settings (``s3://`` is
mapped to S3A, so table URIs are the same strings everywhere), delta-rs' storage options and a
DuckDB secret. Credentials are resolved when a root is opened and never logged: reprs of
``S3Access`` hide them.

Single writer: Delta on S3 through Spark uses ``S3SingleDriverLogStore`` (S3 has no atomic
put-if-absent in Hadoop's S3A), so two builds committing to one table at once could overwrite a
commit. ``lakehouse.lease`` keeps builds one at a time per lakehouse, with a conditional put.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from replicator.config.model import LakehouseConfig
from replicator.errors import ConfigError

__all__ = [
    "S3Access",
    "as_root",
    "lakehouse_root",
    "s3_access",
    "s3_root",
    "describe_store_error",
    "config_error",
    "store_problem",
    "delta_options",
    "remove_tree",
]

_log = logging.getLogger(__name__)

# Fail in seconds, not after botocore's minutes of retries, when the endpoint does not answer.
_CONNECT_TIMEOUT_S = 5
_ATTEMPTS = 3


@dataclass(frozen=True)
class S3Access:
    """One S3 store as every engine needs it (resolved: never log ``key``/``secret``/``token``)."""

    endpoint: str | None
    region: str
    path_style: bool
    key: str | None = field(default=None, repr=False)
    secret: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, config: LakehouseConfig) -> S3Access:
        r = config.s3.resolved()
        return cls(
            endpoint=r["endpoint"],
            region=r["region"] or "us-east-1",
            path_style=r["path_style"] == "true",
            key=r["access_key_id"],
            secret=r["secret_access_key"],
            token=r["session_token"],
        )

    @property
    def secure(self) -> bool:
        return self.endpoint is None or urlsplit(self.endpoint).scheme != "http"

    def s3fs_options(self) -> dict[str, Any]:
        """``s3fs.S3FileSystem``'s keyword arguments (what ``UPath`` passes on)."""
        options: dict[str, Any] = {
            "client_kwargs": {"region_name": self.region},
            "config_kwargs": {
                "connect_timeout": _CONNECT_TIMEOUT_S,
                "retries": {"max_attempts": _ATTEMPTS, "mode": "standard"},
                "s3": {"addressing_style": "path" if self.path_style else "virtual"},
            },
        }
        if self.endpoint:
            options["endpoint_url"] = self.endpoint
        if self.key and self.secret:
            options.update(key=self.key, secret=self.secret)
            if self.token:
                options["token"] = self.token
        else:
            options["anon"] = False  # boto's own chain (instance profile, web identity, ~/.aws)
        return options

    def delta_rs_options(self) -> dict[str, str]:
        """delta-rs' (``object_store``'s) storage options."""
        options = {
            "AWS_REGION": self.region,
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false" if self.path_style else "true",
            # S3's conditional put (If-None-Match) makes delta-rs' commits safe without a lock table.
            "AWS_CONDITIONAL_PUT": "etag",
        }
        if self.endpoint:
            options["AWS_ENDPOINT_URL"] = self.endpoint
            if not self.secure:
                options["AWS_ALLOW_HTTP"] = "true"
        if self.key and self.secret:
            options.update(AWS_ACCESS_KEY_ID=self.key, AWS_SECRET_ACCESS_KEY=self.secret)
            if self.token:
                options["AWS_SESSION_TOKEN"] = self.token
        return options

    def spark_settings(self) -> dict[str, str]:
        """Hadoop S3A settings, set on a session at run time (``spark.conf``): Spark copies them into
        every Hadoop configuration it makes, Delta's and the streaming checkpoints' included."""
        settings = {
            "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",  # s3:// URIs, as delta-rs and DuckDB write them
            "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",  # the streaming checkpoints' API
            "fs.s3a.endpoint.region": self.region,
            "fs.s3a.path.style.access": "true" if self.path_style else "false",
            "fs.s3a.connection.ssl.enabled": "true" if self.secure else "false",
            "fs.s3a.attempts.maximum": str(_ATTEMPTS),
            "fs.s3a.retry.limit": str(_ATTEMPTS),
            "fs.s3a.connection.establish.timeout": f"{_CONNECT_TIMEOUT_S}s",
        }
        if self.endpoint:
            settings["fs.s3a.endpoint"] = self.endpoint
        if self.key and self.secret:
            settings.update({"fs.s3a.access.key": self.key, "fs.s3a.secret.key": self.secret})
            if self.token:
                settings["fs.s3a.session.token"] = self.token
                settings["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            else:
                settings["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        return settings

    def duckdb_secret(self, scope: str) -> dict[str, str | bool]:
        """DuckDB's ``CREATE SECRET (TYPE s3, ...)`` parameters for httpfs, scoped to ``scope`` (``s3://bucket``)."""
        params: dict[str, str | bool] = {
            "REGION": self.region,
            "URL_STYLE": "path" if self.path_style else "vhost",
            "USE_SSL": self.secure,
            "SCOPE": scope,
        }
        if self.endpoint:
            params["ENDPOINT"] = urlsplit(self.endpoint).netloc
        if self.key and self.secret:
            params.update(KEY_ID=self.key, SECRET=self.secret)
            if self.token:
                params["SESSION_TOKEN"] = self.token
        return params


def lakehouse_root(config: LakehouseConfig) -> Path:
    """The lakehouse's root: ``Path`` for a directory (resolved against the working directory), an
    S3 ``UPath`` carrying the store's access for ``s3://bucket/prefix``."""
    if not config.path.startswith("s3://"):
        return Path(config.path).resolve()
    return s3_root(config.path, S3Access.of(config))


def as_root(root: Path | str) -> Path:
    """A root given as a path or text: an S3 ``UPath`` as it is, ``s3://...`` text reached with the
    standard AWS environment, anything else a local directory (resolved)."""
    if not isinstance(root, str) and s3_access(root) is not None:
        return root
    if isinstance(root, str) and root.startswith("s3://"):
        return lakehouse_root(LakehouseConfig(path=root))
    return Path(root).resolve()


def s3_root(uri: str, access: S3Access) -> Path:
    from upath import UPath

    return UPath(uri, **access.s3fs_options())  # type: ignore[return-value]  # pathlib's API


def s3_access(path: Path) -> S3Access | None:
    """The store a root (or a path under it) is on; None for a local path."""
    options = getattr(path, "storage_options", None)
    if getattr(path, "protocol", "") not in ("s3", "s3a") or options is None:
        return None
    config = options.get("config_kwargs", {})
    return S3Access(
        endpoint=options.get("endpoint_url"),
        region=options.get("client_kwargs", {}).get("region_name", "us-east-1"),
        path_style=config.get("s3", {}).get("addressing_style") == "path",
        key=options.get("key"),
        secret=options.get("secret"),
        token=options.get("token"),
    )


def describe_store_error(uri: str, exc: BaseException) -> str:
    """One clear sentence for what the store said: credentials refused, no such bucket, no answer."""
    text = f"{type(exc).__name__}: {exc}"
    lowered = text.lower()
    if "nosuchbucket" in lowered or "bucket does not exist" in lowered or "no such bucket" in lowered:
        return f"{uri}: the bucket does not exist"
    refused = (
        "invalidaccesskeyid", "signaturedoesnotmatch", "accessdenied", "forbidden", "403", "signature we calculated",
        "access key id you provided", "security token", "expiredtoken",
    )  # fmt: skip
    if any(s in lowered for s in refused):
        return f"{uri}: the store refused the credentials (access key id or secret wrong, or no access to the bucket)"
    if any(s in lowered for s in ("could not connect", "connect timeout", "connection refused", "endpoint url")):
        return f"{uri}: the store's endpoint does not answer ({_first_line(exc)})"
    return f"{uri}: {_first_line(exc)}"


def store_problem(root: Path) -> str | None:
    """Why ``root``'s store cannot be used (no bucket, credentials refused, no answer); None when it
    can or ``root`` is local. One listing of the bucket's top level."""
    if s3_access(root) is None:
        return None
    bucket = str(root).split("/", 3)[2]
    try:
        root.fs.ls(bucket, refresh=True)  # type: ignore[attr-defined]  # UPath's s3fs
    except Exception as exc:  # noqa: BLE001 - s3fs' and botocore's errors share no base
        return describe_store_error(str(root), exc)
    return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def config_error(uri: str, exc: BaseException) -> ConfigError:
    return ConfigError(f"lakehouse.path: {describe_store_error(uri, exc)}")


def delta_options(path: Path) -> dict[str, str] | None:
    """delta-rs' storage options for a table at ``path`` (None: a local table)."""
    access = s3_access(path)
    return None if access is None else access.delta_rs_options()


def remove_tree(path: Path) -> None:
    """Remove the directory ``path`` and everything under it, on either store (gone already: nothing)."""
    if s3_access(path) is not None:
        path.fs.rm(path.path, recursive=True)  # type: ignore[attr-defined]  # a UPath
    else:
        shutil.rmtree(path, ignore_errors=True)
