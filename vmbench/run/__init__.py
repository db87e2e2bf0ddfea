"""The run engine: what a run does, step by step.

``plan.py`` turns a scenario into boots and fio steps (pure); ``runner.py`` runs the
preflight (``preflight.py``), executes the plan's pending steps, boot group by boot group
(``bootgroup.py``: provisions through a driver, boots, measures layer by layer) or load unit
by load unit (``loadstep.py``), and cleans up; ``measure.py`` runs one fio step and stores
it; ``evidence.py`` checks that every requested setting took effect; ``environment.py``
records the host; ``ledger.py`` and ``signals.py`` keep a run removable after Ctrl-C or
``kill -9``.
"""
