"""tiny-pi: a small agent runtime and the harness that checks the course's chapter checkpoints."""
