"""Calibration: fit the cost model's efficiency parameters to real measurements.

``fit_calibration(profiles, observations, base=...)`` returns a ``CalibrationResult`` with the
fitted ``EfficiencyParams`` (pass them to ``estimate(..., params=...)``), which parameters moved,
and the error per source before and after, in-sample and k-fold held out. It raises
``CalibrationError`` instead of returning parameters it cannot stand behind.

Modules: ``space`` (parameters, bounds, transforms), ``points`` (pricing each measurement with
the model's own formulas), ``guards`` (input checks), ``solver`` (robust bounded least squares),
``fit`` (the procedure), ``result`` (what is reported and stored).

See README.md, 'Profile and calibrate'.
"""

from costmodel.calibration.fit import fit_calibration
from costmodel.calibration.guards import CalibrationError
from costmodel.calibration.result import Calibration, CalibrationResult, ParamChange, SourceError
from costmodel.calibration.space import DEFAULT_FIT, PARAMETERS

__all__ = [
    "DEFAULT_FIT",
    "PARAMETERS",
    "Calibration",
    "CalibrationError",
    "CalibrationResult",
    "ParamChange",
    "SourceError",
    "fit_calibration",
]
