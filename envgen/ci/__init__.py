"""What the GPU CI matrix runs: cells (matrix/cells.toml), their locks and their results."""
