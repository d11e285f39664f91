"""Work that outgrows one machine, on a Ray cluster (``pip install 'tritonkit[cluster]'``).

* :func:`run_cluster_sweep` (``perf sweep REPO A B … --cluster ADDR``): each model's sweep as a Ray
  task on a node with what its variants need, its own bundled server and perf_analyzer there; the
  joint phase of co-located models on one node after their alone phases; results written under the
  sweep folder as a local run writes them, each model's node named, winners written back last.
* :func:`run_cluster_perf` (``perf run MODEL --url URL --cluster ADDR --clients N``): N perf_analyzer
  clients on N nodes against one endpoint, started together, each node's clock offset removed, every
  request merged (:func:`merge_exports`, pure): exact percentiles, throughput over the common window.

Ray is imported only when a cluster is used (:func:`~tritonkit.perf.cluster.nodes.import_ray`); the
rest of tritonkit never needs it. Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports as _lazy_exports

__all__ = ["ClockOffset", "ClusterAnalyzer", "ClusterEvent", "ClusterSettings", "ClusterSweepResult", "MergedStep",
           "ModelSweep", "NodeInfo", "NodeResources", "estimate_offset", "merge_exports", "parse_node_resources",
           "resources_for", "run_cluster_perf", "run_cluster_sweep", "split_load"]
__getattr__, __dir__ = _lazy_exports(globals())

if TYPE_CHECKING:
    from tritonkit.perf.cluster.clock import ClockOffset, estimate_offset
    from tritonkit.perf.cluster.load import ClusterAnalyzer, run_cluster_perf
    from tritonkit.perf.cluster.merge import MergedStep, merge_exports, split_load
    from tritonkit.perf.cluster.nodes import NodeInfo, NodeResources, parse_node_resources
    from tritonkit.perf.cluster.sweep import (
        ClusterEvent,
        ClusterSettings,
        ClusterSweepResult,
        ModelSweep,
        resources_for,
        run_cluster_sweep,
    )
