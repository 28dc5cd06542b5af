"""The knowledge base: the documents a server's admins (and pinned messages) give Parley, split into sections and
searched by the answer agent's `search_knowledge` tool (tool.py).

Its layer sits above the tools' (`tools.ChatDeps`, which its tool reads) and the archive (which stores the documents
and ranks their words), and below what uses it: the agents, the admins' `/parley-admin knowledge` commands and the
client that holds the `KnowledgeBase`. It knows nothing of Discord.
"""
