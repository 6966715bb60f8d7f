"""PWSM (Du et al., PVLDB 2025): its claims and published numbers."""
