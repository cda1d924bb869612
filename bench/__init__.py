"""`make bench`: the figures in docs/performance.md, measured and written to bench/results.json.

One module per figure, each with a `run(...)` that takes its sizes as
arguments (the smoke test runs them tiny) and returns plain JSON-ready data.
Nothing here asserts a timing: the targets are compared and reported, never
enforced, because a noisy machine must not fail a build.
"""
