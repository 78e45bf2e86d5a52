"""Policies: SW-UCB bandits, PPO parameter editor, XGBoost cost model, pointer-network pre-scheduler."""
