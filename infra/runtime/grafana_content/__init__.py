"""Custom resource that provisions HyperPod's data sources, dashboards and alert rules into a Grafana workspace."""
