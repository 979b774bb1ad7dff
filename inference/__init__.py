"""Engine-agnostic core: turns typed questions about a state into label probabilities.

Nothing in this package imports Django, so the same code runs under the API, the benchmarks and
the management commands, and can be tested without a settings module.
"""
