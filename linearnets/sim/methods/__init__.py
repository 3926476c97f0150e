"""Steppers that see only ``rhs(t, y)`` on flat arrays, and the choice of one for a model."""
from .base import Result, Stepper, StepperOptions, integrate
from .erk import STEPPERS, ExplicitRK
from .rosw import ROSENBROCK, RosenbrockWStepper

__all__ = ["Result", "Stepper", "StepperOptions", "integrate", "STEPPERS", "ExplicitRK",
           "ROSENBROCK", "RosenbrockWStepper", "stepper_for", "FALLBACK",
           "ROSENBROCK_FALLBACK", "ROSENBROCK_JVP"]

#: The low-order pair used at kinks by the explicit methods.
FALLBACK = "BS32"

#: The stepper used at kinks by a Rosenbrock-W primary ("same": the primary itself at
#: ``kink_rtol``; None: no switch; or a method name).  BS32, as for the explicit methods:
#: measured cheaper than "same" and than no switch both on a small sliding ReLU flow and on
#: a stiff wide one (docs/benchmarks_mlp.md, "Kinks under ROS34PW2").  It is
#: stability-bound, but only for the fallback's stretches (``CALM_STEPS`` calm steps
#: bring the Rosenbrock method back).
ROSENBROCK_FALLBACK = "BS32"

#: The Jacobian-vector product of a Rosenbrock primary: ``"finite_differences"`` (one
#: gradient a product, the compiled one on numba) or ``"model"`` (the model's exact
#: ``jvp`` where it has one: ``MLP.jvp``, numpy, about two gradients a product).  Finite
#: differences by default: on bench_mlp's large problem the exact product made the run
#: 1.6x slower for the same steps (docs/benchmarks_mlp.md).
ROSENBROCK_JVP = "finite_differences"


def stepper_for(name, net):
    """``(primary, fallback)`` stepper classes of method ``name`` for model ``net`` (the
    fallback only for a piecewise-smooth model): a Rosenbrock-W method gets the model's
    ``metric`` (its inverse rates) and, with ``ROSENBROCK_JVP = "model"``, the model's
    ``jvp`` bound (otherwise finite differences)."""
    if name in ROSENBROCK:
        jvp = getattr(net, "jvp", None) if ROSENBROCK_JVP == "model" else None
        primary = ROSENBROCK[name].bind(jvp=jvp, metric=net.metric)
        if ROSENBROCK_FALLBACK == "same":
            low = primary
        elif ROSENBROCK_FALLBACK is None:
            low = None
        else:
            low = STEPPERS.get(ROSENBROCK_FALLBACK) or ROSENBROCK.get(ROSENBROCK_FALLBACK)
    else:
        primary = STEPPERS[name]
        low = STEPPERS[FALLBACK]
    return primary, (None if net.smooth else low)
