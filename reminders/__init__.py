"""Reminders and timed posts: members' words for times (`when`), the rules for setting, listing and cancelling
them (`book`), and the answer agent's `remind` tool (`tool`).

The layers: `when` is pure (below everything that reads times), `book` sits beside the memory store over the
archive's `ReminderTable`, `tool` just above the tools package (whose `ChatDeps` and registry it reads). Storage is
archive/reminders.py, the command is commands/remind.py, and posting at the time is reminders/scheduler.py with
edge/reminder_posts.py.
"""
