"""What tests share: Kubernetes-shaped builders (:mod:`.objects`), waits (:mod:`.waits`),
readers of what the store holds (:mod:`.readers`) and TLS material (:mod:`.tls`).

A helper more than one test module needs lives here or in its package's helper module,
never in a ``test_*.py`` module that others import."""
