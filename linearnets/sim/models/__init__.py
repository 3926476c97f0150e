"""Models of the simulator, one module each, behind :mod:`.base`'s interface."""
from .base import (ACTIVATIONS, LOSSES, Layout, Model, ModelOptions, get_model, model_names,
                   parse_options, register_model, select_model)

__all__ = ["ACTIVATIONS", "LOSSES", "Layout", "Model", "ModelOptions", "get_model",
           "model_names", "parse_options", "register_model", "select_model"]
