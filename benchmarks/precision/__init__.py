"""bfloat16 autocast against fp32, with evidence: the same fits in both precisions, compared on
the validation loss each selects (`python -m benchmarks.precision`), and docs/results/precision.md,
rendered from the committed runs (`python -m benchmarks.precision.record`)."""
