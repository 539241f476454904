"""``rollout-chaos gate``: the catalog on a trainer's base tree and on its head tree, compared.

A PR that fixes a bug turns its scenario green; a regression turns one red. Each side runs in its
own pytest subprocess (``sides``), its verdicts are read back from JUnit XML (``verdicts``),
compared scenario by scenario (``compare``) and printed as a table, Markdown and JSON (``render``).
"""
