"""What the model sees: the prompts and history (`context`), and how chat data is quoted (`quoting`)."""
