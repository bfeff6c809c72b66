"""A flow's counters and their exposition: ``FlowStats`` (``stats.py``), the MM2-named series
(``mm2_metrics.py``, ``connect_metrics.py``: Strimzi's dashboards work unchanged) and the
Prometheus collector with ``/health`` (``observability.py``). Plain data and no runtime: the
flow writes the counters, the state tasks add theirs, the endpoint reads them."""
