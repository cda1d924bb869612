"""The local runner: the Lambdas' own handlers served over HTTP on an embedded moto."""
