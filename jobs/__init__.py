"""PySpark analytics over the decoded dataset: one script per family of questions."""
