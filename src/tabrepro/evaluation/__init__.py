"""Evaluation: test metrics in the papers' units."""
