"""Operations: how Parley is run and watched (logging and observability setup, the command line, preflight)."""
