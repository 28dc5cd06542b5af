"""The decider's evaluation: the IRC set's builder, replaying transcripts, and training the learned tier."""
