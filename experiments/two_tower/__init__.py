"""Two-tower training with a Gramian-form all-pairs penalty, shared by the Gramian experiments."""
