"""tritonkit: Triton model repositories that are right the first time.

Build a model into a repository (``tritonkit.builders``), describe and lint its
configs (``tritonkit.repository``), serve it on a real tritonserver
(``tritonkit.server``), call it (``tritonkit.client``), prove how much load it
carries within an SLA (``tritonkit.perf``) and size the fleet (``tritonkit.planner``).
"""

from __future__ import annotations

from tritonkit.errors import TritonKitError

__version__ = "0.1.0"

__all__ = ["TritonKitError", "__version__"]
