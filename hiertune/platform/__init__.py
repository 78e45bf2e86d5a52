"""Ray side of hiertune: runtime, resource-pinned measurement runners, records, solver actor."""
