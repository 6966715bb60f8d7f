"""PLDP-IDS (Du et al.): its runs, plots, claims and section of RESULTS.md."""
