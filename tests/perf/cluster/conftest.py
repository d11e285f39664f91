"""A real two-node Ray cluster on loopback (one CPU each), started once for this package's tests.

Package-scoped rather than session-scoped: it is stopped as soon as the last cluster test has run,
so that an idle cluster's processes do not take CPU from the timing of the tests that follow.

Tests that change a cluster (kill a node, add a node without perf_analyzer) start their own with
:func:`own_cluster`. Either way the cluster's processes are stopped by process group at the end,
and the session fails if any process it started (Ray's, or a remote tritonserver / perf_analyzer)
outlives it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ray_cluster import LocalRayCluster


def _short_root() -> Path:
    # Ray's unix sockets live under each node's folder (…/session_<date>_<pid>/sockets/plasma_store):
    # a pytest tmp_path makes that longer than the 107 bytes a socket path may have.
    return Path(tempfile.mkdtemp(prefix="tkr", dir="/tmp"))


def _stop_and_check(cluster: LocalRayCluster) -> None:
    cluster.stop()
    left = cluster.leftovers()
    if not left:
        shutil.rmtree(cluster.root, ignore_errors=True)
    assert not left, f"processes of the test cluster outlived it: {left}"


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[LocalRayCluster]:
    """A head and one worker node, one CPU each, shared by the package's cluster tests."""
    cluster = LocalRayCluster(_short_root(), workers=1)
    try:
        yield cluster.start()
    finally:
        _stop_and_check(cluster)


@pytest.fixture
def own_cluster() -> Iterator[Callable[..., LocalRayCluster]]:
    """A factory: ``own_cluster(workers=2, node_env={...})`` starts a cluster this test owns alone."""
    started: list[LocalRayCluster] = []

    def _start(**kwargs: Any) -> LocalRayCluster:
        cluster = LocalRayCluster(_short_root(), **kwargs)
        started.append(cluster)
        return cluster.start()

    yield _start
    for cluster in started:
        _stop_and_check(cluster)
