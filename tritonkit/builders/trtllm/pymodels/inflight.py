# mypy: ignore-errors
"""The in-flight loop both CPU reference models run (``reference_engine.py``, ``reference_llmapi.py``).

It is copied beside their ``model.py`` (the python backend imports from the version folder, as
``tiny_lm.py``), so it imports only the standard library, never tritonkit.
"""

import collections
import threading


class InFlightLoop:
    """One background thread runs the model's ``_run``: requests wait in ``waiting`` and run in
    ``active``, both guarded by ``cond``; ``finalize`` (the python backend's) stops the thread."""

    def start_loop(self, name):
        self.waiting = collections.deque()
        self.active = []
        self.cond = threading.Condition()
        self.stopping = False
        self.loop = threading.Thread(target=self._run, name=name, daemon=True)
        self.loop.start()

    def enqueue(self, items):
        """Queue ``items`` for the loop and wake it."""
        with self.cond:
            self.waiting.extend(items)
            self.cond.notify()

    def wait_for_work(self):
        """With ``cond`` held: wait until a request waits or runs; False once the model is stopping."""
        while not self.stopping and not self.waiting and not self.active:
            self.cond.wait(0.5)
        return not self.stopping

    def finalize(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.loop.join(timeout=5)
