"""Reference checkpoints: one module per chapter, the code each chapter builds."""
