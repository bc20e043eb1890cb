"""Kubernetes side of stratalog: CRD generation (and, later, the kopf controller and agent)."""
