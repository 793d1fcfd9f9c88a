"""Seeing a run: the console view (:mod:`.console`), OpenTelemetry tracing (:mod:`.tracing`)
and printing of models and messages (:mod:`.printable`).
"""
