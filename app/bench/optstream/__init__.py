"""OptStream (Fioretto & Van Hentenryck, AAMAS 2018): its runs, figures, claims and section."""
