"""The model layer: pydantic-ai models built from the settings, and the transport they talk to providers through.

It imports nothing of Parley but the settings; the agents (agent.py), summaries (prompting/context.py) and preflight
build their models here.
"""
