"""The one compiled module: the flow's produce path (``replicator/flow/copying/_copycore.c``).

Everything else is in pyproject.toml. The extension needs gcc, Python's headers and librdkafka's
header (Debian: ``python3-dev``, ``librdkafka-dev``; scripts/bootstrap.sh installs them). It links no
librdkafka: it uses the one confluent-kafka's wheel bundles, found at run time. Where it cannot be
built, the install still succeeds and flows copy on the pure-Python path (``copy_engine``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "replicator.flow.copying._copycore",
            sources=["replicator/flow/copying/_copycore.c"],
            libraries=["dl", "pthread"],
            extra_compile_args=["-O2", "-Wall", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
