"""The operator set: one module per operator family, named after it.

Each is written with the public building blocks (``unary``, ``binary``,
``OperatorBuilder``) and exposed as a :class:`~timelypy.dataflow.Stream`
method.
"""
