"""distsched: kube-scheduler's scheduling queue and framework, distributed over Redis."""

__version__ = "0.1.0"
