"""A decoupled python model that streams on a schedule known by construction, for the LLM load tests.

``stream_model_py`` writes its ``model.py``: each request gets ``responses`` data responses
(``tensor(k)``, the caller's code building response ``k``'s output tensor), the first
``first_ms`` after the request reaches the model and then one every ``interval_ms`` (sleeps to
deadlines from one start, so no drift), each request on its own thread; then ``closing`` (the
caller's code sending whatever ends the stream). With ``final_on_data`` the final flag rides on
the last data response instead.
"""

from __future__ import annotations

import textwrap

__all__ = ["stream_model_py"]

_MODEL = """
import threading
import time
import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def tensor(k):
{tensor}


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.stream, args=(request.get_response_sender(),), daemon=True).start()
        return None

    def stream(self, sender):
        start = time.monotonic()
        for k in range({responses}):
            wait = start + ({first_ms} + k * {interval_ms}) / 1000.0 - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            response = pb_utils.InferenceResponse([tensor(k)])
            if k == {responses} - 1 and {final_on_data}:
                sender.send(response, flags=FINAL)
            else:
                sender.send(response)
{closing}
"""


def stream_model_py(
    tensor: str, *, responses: int, first_ms: float, interval_ms: float, closing: str = "sender.send(flags=FINAL)",
    final_on_data: bool = False,
) -> str:
    """The model's source; ``tensor`` is the body of ``tensor(k)``, ``closing`` runs after the data responses."""
    return _MODEL.format(tensor=textwrap.indent(tensor, "    "), closing=textwrap.indent(closing, "        "),
                         responses=responses, first_ms=first_ms, interval_ms=interval_ms, final_on_data=final_on_data)
