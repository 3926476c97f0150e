"""Gradient-flow simulation. Imports nothing from :mod:`linearnets.theory`."""
