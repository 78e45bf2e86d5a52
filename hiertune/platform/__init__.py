"""Ray side of hiertune: runtime, resource-pinned measurement runners, records, the solver actor,
sweeps, and the two tuners side by side (HARL and the MetaSchedule baseline)."""
