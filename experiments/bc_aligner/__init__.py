"""BC-Aligner end to end (Hu et al., KDD 2022, Table 3 / Fig. 3 / Fig. 5) on evolving user–item graphs."""
