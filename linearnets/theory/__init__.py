"""Closed-form theory. Imports nothing from :mod:`linearnets.sim`."""
