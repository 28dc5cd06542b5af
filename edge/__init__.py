"""The edge: what touches Discord directly besides the client (messages resolved, threads, command sync, gateway)."""
