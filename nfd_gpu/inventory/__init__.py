"""``nfd-gpu inventory``: the cluster's GPUs from the agents' NodeFeatures, read-only.

- ``collect.py``: the API reads, as a :class:`~collect.ClusterState`.
  They are paginated lists of NodeFeatures, Nodes, agent Pods and, where the server has
  them, ResourceSlices.
- ``report.py``: the join: GPUs by product x node x health, and the disagreements.
- ``render.py``: table, CSV and JSON.
- ``htmlpage.py``: the self-contained HTML report.
"""
