"""What Parley remembers: members' facts and named copies of a channel's history (`store`)."""
