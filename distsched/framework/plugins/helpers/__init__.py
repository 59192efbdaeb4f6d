"""Helpers shared by several plugins (taint matching, node selectors, score normalization)."""
