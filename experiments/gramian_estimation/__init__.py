"""Gramian estimation error on a common parameter trajectory (Figure 2a, 2b of the Gramian paper)."""
