"""Stage 2, fold: checked records into the one run model, and the reader's judgement of each run (the verdict)."""
