"""The knowledge base: the documents a server's admins (and pinned messages) give Parley, split into sections and
searched for the answer agent's `search_knowledge` tool.

The layer between the archive (which stores the documents and ranks their words) and what uses it: `tools` (the
search tool), `commands` (the admins' `/parley-admin knowledge`) and the pins' upkeep. It knows nothing of Discord.
"""
