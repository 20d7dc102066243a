"""SOGram vs candidate sampling: validation MAP@10 over training time (Table 2, Figures 3 and 9 of the Gramian
paper)."""
