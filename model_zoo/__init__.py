"""QAT-ready model definitions and training recipes."""
