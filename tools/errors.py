"""What a tool setting that cannot work raises."""


class ToolConfigError(Exception):
    """A tool setting that cannot work: the message is one line naming the setting."""
