"""Answering: producing an answer and its outcome; one function posts, records, compacts and archives it."""
