"""Where :func:`field_default` was first defined; it lives in :mod:`tritonkit._values` now, beside
:func:`~tritonkit._values.field_bounds`: an option's default and its limits, both read from a settings field."""

from tritonkit._values import field_default

__all__ = ["field_default"]
