"""bfloat16 autocast against fp32, with evidence: the same fits in both precisions, compared on
the validation loss each selects (`python -m benchmarks.precision`), and the README's record of
such runs (`python -m benchmarks.precision.record`)."""
