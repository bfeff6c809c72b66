"""A real S3 API server on 127.0.0.1 for the tests: moto's standalone server, one per test session.

Started by the first test that asks for it and stopped by PID when the session ends. Each test
gets a bucket of its own (``s3_bucket``) and the config block that reaches it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.dashboard_support import free_port
from tests.waiting import wait_for

__all__ = ["S3Server", "s3_server", "s3_bucket"]

# Requests moto serves before it checks signatures: the three that make the tests' IAM user.
_SETUP_ACTIONS = 3


@dataclass(frozen=True)
class S3Server:
    """The server and the one IAM user whose key it accepts (signatures checked, as AWS does)."""

    endpoint: str
    key_id: str = ""
    secret: str = ""

    def client(self, service: str = "s3"):  # noqa: ANN201 - a boto3 client
        import boto3

        return boto3.client(
            service, endpoint_url=self.endpoint, aws_access_key_id=self.key_id or "setup",
            aws_secret_access_key=self.secret or "setup", region_name="us-east-1",
        )  # fmt: skip

    def lakehouse(self, path: str, **s3: object) -> dict[str, object]:
        """A config's ``lakehouse`` block for ``path`` on this server (``s3`` overrides its keys)."""
        block = {"endpoint": self.endpoint, "access_key_id": self.key_id, "secret_access_key": self.secret, **s3}
        return {"path": path, "s3": block}

    def with_user(self) -> S3Server:
        """This server with an IAM user allowed everything (made while moto checks no signature yet)."""
        import json

        iam = self.client("iam")
        iam.create_user(UserName="mirrorlake-tests")
        key = iam.create_access_key(UserName="mirrorlake-tests")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="mirrorlake-tests", PolicyName="all", PolicyDocument=json.dumps(policy))
        return S3Server(self.endpoint, key["AccessKeyId"], key["SecretAccessKey"])

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _moto_server() -> str:
    found = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
    if found is None:
        raise RuntimeError("moto_server is not installed: pip install 'moto[server]' (make setup-test does)")
    return found


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [_moto_server(), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "INITIAL_NO_AUTH_ACTION_COUNT": str(_SETUP_ACTIONS)},
        )  # fmt: skip
    server = S3Server(f"http://127.0.0.1:{port}")
    try:
        wait_for(lambda: proc.poll() is not None or _listening(port), "moto's S3 server", 60)
        assert proc.poll() is None, log.read_text()[-2000:]
        yield server.with_user()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _listening(port: int) -> bool:
    """Whether the port takes connections (no request: moto counts requests before it checks signatures)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A new, empty bucket on the session's S3 server."""
    name = f"lake-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=name)
    return name
