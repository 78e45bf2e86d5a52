"""Search spaces as environments: workloads, schedule state and edits, the HARL hierarchy, DNN graphs."""
