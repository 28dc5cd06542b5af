"""Per-channel settings: a server default and per-channel overrides of persona, model, tools and mode."""
