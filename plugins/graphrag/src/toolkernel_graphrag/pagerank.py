"""Personalized PageRank by power iteration on a scipy.sparse transition matrix.

Measured on a 50k-node, 500k-edge graph: scipy.sparse power iteration takes 8-16 ms per query,
where rustworkx takes 171 ms, igraph 451 ms and networkx 2.2 s, all agreeing on the top 20.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

FloatArray = npt.NDArray[np.float64]

PRECISION = 1e-4
"""The walk runs until at most this much probability mass can still move (``damping ** n``): a fixed
number of iterations for a given damping, so the same graph always takes the same steps: 26 at damping
0.7. Each step is a sparse product over the whole graph, the walk's whole cost; on the development split
of HotpotQA, 1e-4 ranked every question's top 30 exactly as 1e-6 (39 steps) did, 1e-3 (20) changed one."""


def transition_matrix(adjacency: sp.csr_array, allowed: npt.NDArray[np.bool_] | None = None) -> sp.csr_array:
    """Column-stochastic transitions of a symmetric weighted adjacency, restricted to ``allowed`` nodes.

    A node outside ``allowed`` loses every edge, so no walk enters or leaves it; a node with no
    edge keeps no outgoing mass (the walk restarts from the seeds).
    """
    if allowed is not None:
        keep = sp.diags_array(allowed.astype(np.float64))
        adjacency = sp.csr_array(keep @ adjacency @ keep)
    degree = np.asarray(adjacency.sum(axis=0)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    return sp.csr_array(adjacency @ sp.diags_array(inverse))


def personalized_pagerank(transitions: sp.csr_array, restart: FloatArray, damping: float) -> FloatArray:
    """The stationary distribution of a walk that follows an edge with probability ``damping`` and
    jumps back to ``restart`` (a distribution over nodes) otherwise.

    Mass that reaches a node without edges is sent back through ``restart``, so the result sums to 1.
    """
    total = restart.sum()
    if total <= 0:
        return np.zeros_like(restart)
    restart = restart / total
    scores = restart.copy()
    for _ in range(iterations(damping)):
        walked = transitions @ scores
        walked *= damping
        walked += (1.0 - walked.sum()) * restart
        scores = walked
    return scores


def iterations(damping: float) -> int:
    """Power-iteration steps after which less than :data:`PRECISION` of the mass can still move."""
    return max(1, math.ceil(math.log(PRECISION) / math.log(damping)))
