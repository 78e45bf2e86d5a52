"""Stage partitioning: the ILP (Gurobi / HiGHS / CP-SAT backends), the exact DP over ideals, the
Inc-ILP window, baselines, certificates and the graph importers (TFLite, ONNX, JSON). The bottom
layer: no torch, no Ray; a pre-scheduler (the pointer net) is injected from above."""
