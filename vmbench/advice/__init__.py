"""Advice (issue 18): which measured change closes the gap on the user's goal, with its
evidence, what it risks, what was not tried, and the exact command or XML to apply it.

:mod:`.model` holds the contract (goals, risks, recommendations); the rest is pure and reads a
loaded run (:class:`vmbench.report.load.RunData`).  ``vmbench tune`` (:mod:`vmbench.tune`) asks
the same questions of each round it runs.
"""
