"""Methods that know no networks: tableaux, steppers, the one adaptive loop, the compiled
loops' runners and the choice of a method's loop for a model (``driver``)."""
from .base import FlowStatus, Result, StepControl, Stepper, StepperOptions, integrate
from .driver import (FALLBACK, METHODS, ROSENBROCK_FALLBACK, ROSENBROCK_JVP, auto, run,
                     stepper_for)
from .erk import STEPPERS, ExplicitRK
from .rosw import ROSENBROCK, RosenbrockWStepper
from .ssp import LowStorageRK

__all__ = ["FlowStatus", "Result", "StepControl", "Stepper", "StepperOptions", "integrate",
           "STEPPERS", "ExplicitRK", "LowStorageRK", "ROSENBROCK", "RosenbrockWStepper",
           "METHODS", "run", "auto", "stepper_for", "FALLBACK", "ROSENBROCK_FALLBACK",
           "ROSENBROCK_JVP"]
