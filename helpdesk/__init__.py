"""The support desk: in the channels an admin put in support mode, Parley answers the questions nobody addressed when
the server's documents hold the answer, hands the others off to staff, and reports what the documents lack."""
