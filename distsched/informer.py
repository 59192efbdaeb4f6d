"""The store's informer; implemented in :mod:`distsched.store.informer`."""

from distsched.store.informer import EventHandler, FuncHandler, Informer

__all__ = ["EventHandler", "FuncHandler", "Informer"]
