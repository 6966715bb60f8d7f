"""LDP-IDS (Ren et al., SIGMOD 2022): its runs, claims and published numbers."""
