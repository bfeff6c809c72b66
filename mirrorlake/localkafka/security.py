"""SASL_SSL for a local broker: TLS material made with openssl, SCRAM and PLAIN users, ACLs enforced.

Everything lives in ``<cluster dir>/tls`` and is made once: a CA (``ca.pem``, what clients trust
through librdkafka's ``ssl.ca.location``), the broker's key and certificate for 127.0.0.1 and
localhost, and a PKCS12 key store for the broker's JVM (it trusts ``ca.pem`` as a PEM trust
store). The store password is random and kept in ``tls/store.password`` (mode 600), never logged.

The client listener speaks SASL_SSL with SCRAM-SHA-512 and PLAIN; the controller listener stays
PLAINTEXT on 127.0.0.1 (its principal, ANONYMOUS, is a super user so the broker can reach its own
controller). ``admin`` is the other super user; every other user needs ACLs:
``allow.everyone.if.no.acl.found=false``. SCRAM credentials are written into the storage when it is
formatted (``StorageTool format --add-scram``), PLAIN users into the listener's JAAS config.

``MutualTls`` is the other secured listener: SSL with ``ssl.client.auth=required``, as Strimzi's
``authentication: type: tls``. Every principal gets a client certificate (``CN=<name>``) signed by
the same CA, and ``ssl.principal.mapping.rules`` turns ``CN=alice`` into ``User:alice``, so ACLs
read as they do for SASL users. The broker's own certificate (CN 127.0.0.1) is its principal on
its inter-broker listener, a super user beside ``admin``.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from collections.abc import Mapping
from pathlib import Path

from replicator.errors import ClusterStartError, ConfigError, ToolMissingError

__all__ = ["ADMIN", "MutualTls", "SaslSsl", "TlsFiles"]

ADMIN = "admin"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_PASSWORD = re.compile(r'^[^"\\\s,\]\[=]+$')  # JAAS and --add-scram quoting cannot carry these


class SaslSsl:
    """The SASL_SSL side of one local broker: ``users`` maps user names to passwords (``admin`` included)."""

    def __init__(self, cluster_dir: Path, users: Mapping[str, str]) -> None:
        if ADMIN not in users:
            raise ConfigError(f"a SASL_SSL local broker needs the super user {ADMIN!r} among its users")
        for name, password in users.items():
            if not _NAME.match(name) or not _PASSWORD.match(password):
                raise ConfigError(
                    f"local SASL user {name!r}: names are [A-Za-z0-9_.-]+ and passwords must not contain quotes, "
                    "backslashes, spaces, commas, brackets or '='"
                )
        self.users = dict(users)
        self.tls_dir = Path(cluster_dir) / "tls"

    @property
    def ca_pem(self) -> Path:
        return TlsFiles(self.tls_dir).ca_pem

    def client_config(self, user: str, *, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """librdkafka settings for ``user`` (without ``bootstrap.servers``)."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": mechanism,
            "sasl.username": user,
            "sasl.password": self.users[user],
            "ssl.ca.location": str(self.ca_pem),
        }

    def make_tls_once(self) -> None:
        """CA, broker certificate (SAN 127.0.0.1, localhost) and PKCS12 stores, unless they exist."""
        TlsFiles(self.tls_dir).make_once()

    def server_properties(self, port: int, controller_port: int) -> str:
        """The listener, SASL, TLS and authorizer lines of server.properties."""
        tls = TlsFiles(self.tls_dir)
        plain_users = " ".join(f'user_{name}="{pw}"' for name, pw in self.users.items())
        admin_pw = self.users[ADMIN]
        return f"""\
listeners=SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=SASL_SSL://127.0.0.1:{port}
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
username="{ADMIN}" password="{admin_pw}" {plain_users};
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
{tls.store_properties()}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:{ADMIN};User:ANONYMOUS
allow.everyone.if.no.acl.found=false
"""

    def format_arguments(self) -> list[str]:
        """``--add-scram`` arguments of ``StorageTool format``: every user gets a SCRAM-SHA-512 credential."""
        out = []
        for name, password in self.users.items():
            out += ["--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]"]
        return out


class TlsFiles:
    """The TLS material of one local broker, in ``tls_dir``: made once, reused at every start."""

    def __init__(self, tls_dir: Path) -> None:
        self.tls_dir = Path(tls_dir)

    @property
    def ca_pem(self) -> Path:
        return self.tls_dir / "ca.pem"

    def make_once(self) -> None:
        """CA, broker certificate (SAN 127.0.0.1, localhost) and PKCS12 stores, unless they exist."""
        if (self.tls_dir / "broker.p12").exists():
            return
        self.tls_dir.mkdir(parents=True, exist_ok=True)
        password = secrets.token_hex(16)
        password_file = self.tls_dir / "store.password"
        password_file.write_text(password, encoding="ascii")
        password_file.chmod(0o600)
        d = self.tls_dir
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=mirrorlake-local-ca",
                 "-keyout", d / "ca.key", "-out", d / "ca.pem")  # fmt: skip
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                 "-keyout", d / "broker.key", "-out", d / "broker.csr")  # fmt: skip
        (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n", encoding="ascii")
        _openssl("x509", "-req", "-in", d / "broker.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key",
                 "-CAcreateserial", "-days", "3650", "-extfile", d / "san.ext", "-out", d / "broker.pem")  # fmt: skip
        _openssl("pkcs12", "-export", "-in", d / "broker.pem", "-inkey", d / "broker.key", "-certfile", d / "ca.pem",
                 "-name", "broker", "-passout", f"file:{password_file}", "-out", d / "broker.p12")  # fmt: skip
        for key in ("ca.key", "broker.key"):
            os.chmod(d / key, 0o600)

    def client_certificate(self, name: str) -> tuple[Path, Path]:
        """(certificate, key) PEM files of principal ``name`` (subject ``CN=name``), made once."""
        if not _NAME.match(name):
            raise ConfigError(f"local TLS principal {name!r}: names are [A-Za-z0-9_.-]+")
        d = self.tls_dir / "clients"
        cert, key = d / f"{name}.pem", d / f"{name}.key"
        if cert.exists() and key.exists():
            return cert, key
        d.mkdir(parents=True, exist_ok=True)
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", key, "-out", d / f"{name}.csr"
        )
        os.chmod(key, 0o600)
        _openssl("x509", "-req", "-in", d / f"{name}.csr", "-CA", self.ca_pem, "-CAkey", self.tls_dir / "ca.key",
                 "-CAcreateserial", "-days", "3650", "-out", cert)  # fmt: skip
        return cert, key

    def store_properties(self) -> str:
        """The broker's key store and PEM trust store lines of server.properties."""
        password = (self.tls_dir / "store.password").read_text(encoding="ascii").strip()
        return f"""\
ssl.keystore.type=PKCS12
ssl.keystore.location={self.tls_dir / "broker.p12"}
ssl.keystore.password={password}
ssl.key.password={password}
ssl.truststore.type=PEM
ssl.truststore.location={self.ca_pem}"""


class MutualTls:
    """The mutual-TLS side of one local broker: a client certificate for each of ``principals``
    (``admin`` among them, a super user); every other principal needs ACLs."""

    def __init__(self, cluster_dir: Path, principals: tuple[str, ...]) -> None:
        if ADMIN not in principals:
            raise ConfigError(f"a mutual-TLS local broker needs the super user {ADMIN!r} among its principals")
        self.principals = tuple(principals)
        self.files = TlsFiles(Path(cluster_dir) / "tls")

    @property
    def ca_pem(self) -> Path:
        return self.files.ca_pem

    def make_tls_once(self) -> None:
        """The broker's TLS material and every principal's client certificate, unless they exist."""
        self.files.make_once()
        for name in self.principals:
            self.files.client_certificate(name)

    def client_config(self, user: str) -> dict[str, str]:
        """librdkafka settings for principal ``user`` (without ``bootstrap.servers``)."""
        cert, key = self.files.client_certificate(user)
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca_pem),
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
        }

    def server_properties(self, port: int, controller_port: int) -> str:
        """The listener, TLS, principal mapping and authorizer lines of server.properties."""
        return f"""\
listeners=SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=SSL://127.0.0.1:{port}
listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SSL
ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]+)$/$1/,DEFAULT
{self.files.store_properties()}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:{ADMIN};User:ANONYMOUS;User:127.0.0.1
allow.everyone.if.no.acl.found=false
"""

    def format_arguments(self) -> list[str]:
        """Nothing to add to ``StorageTool format``: certificates need no stored credentials."""
        return []


def _openssl(*args: object) -> None:
    try:
        proc = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise ToolMissingError("openssl is not installed (apt-get install openssl): it makes TLS material") from None
    if proc.returncode != 0:
        raise ClusterStartError(f"openssl {args[0]} failed: {proc.stderr.strip()[-500:]}")
