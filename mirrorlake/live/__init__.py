"""The live demo: background processes on local clusters (``demo``), their traffic (``traffic``)."""
