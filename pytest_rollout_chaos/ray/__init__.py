"""The stack on a real Ray cluster (``--rollout-chaos-ray``).

``mode`` parses the option; ``launch`` starts ``local:N`` nodes with ``ray start``, makes the
hosts of ``hosts:N`` (``netns``; ``host_paths`` says what of this machine's disk they read) with
a node on each, or joins a cluster at an address;
``cluster`` is the cluster once open (placement, nodes removed and restored); ``files`` copies
here what servers on nodes that share no files with pytest write; ``host`` is the actor that
runs one server process on its node; ``hosted`` is the pytest side of it, a ``ManagedProcess``
whose child lives in that actor, so the supervisor, the process faults and the reset treat it as
any other server. Ray is an optional extra: nothing here imports ``ray`` at module level except
``host`` and ``hosted``, which only a run with Ray on imports.
"""
