"""Operations: logging and observability setup, the command line, preflight. Nothing here decides or answers."""
