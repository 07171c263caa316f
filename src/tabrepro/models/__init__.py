"""Baseline models behind one small interface (`base.TabularModel`), looked up by name in
`registry.MODEL_REGISTRY`. Adding a model is one module here plus one registry line.

Importing this package stays cheap: the gradient-boosting libraries are imported only when a
model that needs them is fitted.
"""
