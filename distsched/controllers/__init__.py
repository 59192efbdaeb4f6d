"""Workload controllers: Deployment, ReplicaSet, StatefulSet, DaemonSet, Job -> pods.

A role like the workers and the binders (imported only by the cli and the bench):
``workload.WorkloadController`` reconciles, ``main.run_controller`` runs it under a
leader lease.
"""
