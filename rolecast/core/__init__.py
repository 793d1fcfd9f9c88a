"""The kernel's floor: configuration and settings, the pydantic base model, class paths and
serialization, JSON helpers, lazy exports and the checks of how the API is called.

Nothing here imports the rest of rolecast except :mod:`rolecast.errors`
(tests/test_architecture.py holds it to that).
"""
