"""The slash commands: one module per command group, each a discord.py `app_commands.Group` as in discord.py's
examples; they see the client through `commands.tree.Operated`."""
