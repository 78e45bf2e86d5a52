"""Stage-partition ILP (Gurobi / HiGHS / CP-SAT backends), Inc-ILP relaxation window, baselines."""
