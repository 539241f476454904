"""The scenario engine: runs a parsed scenario on the stack and judges what happened.

``run`` resets the stack, collects under the fault schedule (``schedule``), heals, counts what
each fault touched (``acted``), judges the invariants and the expectations (``expectations``)
into a ``result.ScenarioResult``; ``story`` tells a failure. The file format it runs is
``scenario``; the pytest items that call it are ``scenario_items``.
"""
