"""(w,n)-DP (Liu et al. 2021): its trajectory streams, runs, claims and section."""
