"""Installing and locating the external binaries tritonkit drives, and checking the machine.

* :mod:`~tritonkit.provision.perf_analyzer`: install / locate the real perf_analyzer;
* :mod:`~tritonkit.provision.server`: locate a tritonserver (the bundled one by default);
* :mod:`~tritonkit.provision.doctor`: what this machine can do, each missing piece with its fix.
"""

from __future__ import annotations

from tritonkit.provision.doctor import Check, run_checks
from tritonkit.provision.perf_analyzer import (
    PERF_ANALYZER_ENV,
    PERF_ANALYZER_VERSION,
    PerfAnalyzerInstall,
    install_perf_analyzer,
    locate_perf_analyzer,
)
from tritonkit.provision.server import SERVER_BIN_ENV, ServerInstall, locate_server

__all__ = [
    "PERF_ANALYZER_ENV",
    "PERF_ANALYZER_VERSION",
    "SERVER_BIN_ENV",
    "Check",
    "PerfAnalyzerInstall",
    "ServerInstall",
    "install_perf_analyzer",
    "locate_perf_analyzer",
    "locate_server",
    "run_checks",
]
