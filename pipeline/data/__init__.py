"""Corpora, manifests, protocols and audio I/O."""
