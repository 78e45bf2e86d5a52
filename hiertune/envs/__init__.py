"""The search problems as environments: schedule states and their edits, the HARL hierarchy as an
RLlib multi-agent env, synthetic DAGs for the pointer net."""
