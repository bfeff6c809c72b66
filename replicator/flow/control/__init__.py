"""When a flow waits, rejoins and stops: outages of either cluster (``outage.py``), the consumer
group rejoin watchdog (``rejoin.py``), the stop budget (``shutdown.py``), stop requests of
``failover apply --stop-replication`` (``stop_requests.py``), and a batch run's caught-up test
(``caught_up.py``)."""
