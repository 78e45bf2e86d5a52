"""hiertune: hierarchical RL auto-scheduling (HARL) and Inc-ILP pipeline partitioning on Ray."""

__version__ = "0.1.0"
