"""``vmbench tune``: the one-change-at-a-time journey, found automatically (issue 18).

:mod:`.search` (pure) says what each round measures and when to stop; :mod:`.engine` runs
each round as a normal stored run through the runner, judges it with the advice and keeps
the best allowed significant improvement as the next baseline; :mod:`.report` lays the
journey out as report tables.
"""
