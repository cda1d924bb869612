"""The memory core: the spec's rules as pure functions, with no AWS and no I/O.

Both Lambdas, the local runner and the benchmarks share this package; the
adapters (DynamoDB, SQS, the summariser) live beside it, never inside it.
"""
