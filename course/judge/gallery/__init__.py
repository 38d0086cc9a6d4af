"""One module per chapter (named like its checkpoint) listing that chapter's known-wrong variants as MUTANTS."""
