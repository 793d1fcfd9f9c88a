"""Tunings and the optimizer: a team's instructions and demonstrations, made better from its evalset.

:mod:`rolecast.tuning.surface` — the tunable keys of a team, the tuning file, and how a team applies one;
:mod:`rolecast.tuning.optimize` — ``rolecast optimize``: candidates scored on an evalset's train split, the
winner chosen on a dev split it never learnt from.
"""

from .surface import Demo, KeyTuning, Tuning, apply_tuning, load_tuning, surface, tuning_active

__all__ = ["Demo", "KeyTuning", "Tuning", "apply_tuning", "load_tuning", "surface", "tuning_active"]
