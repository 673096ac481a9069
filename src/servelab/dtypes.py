"""Bytes per element of the dtypes servelab prices weights and KV caches in (servelab.hardware re-exports it)."""

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
