"""`make mutation`: mutation testing of the domain (`functions/memory_core`).

Each mutant is one small change to one module; it is killed when a unit test that executes
its line fails. See docs/mutation.md for the figures and the equivalent mutants.
"""
