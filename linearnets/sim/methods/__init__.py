"""Steppers of the general simulator: they see only ``rhs(t, y)`` on flat arrays."""
from .base import Result, Stepper, StepperOptions, integrate
from .erk import STEPPERS, ExplicitRK
from .rosw import ROSENBROCK, RosenbrockWStepper

__all__ = ["Result", "Stepper", "StepperOptions", "integrate", "STEPPERS", "ExplicitRK",
           "ROSENBROCK", "RosenbrockWStepper"]
