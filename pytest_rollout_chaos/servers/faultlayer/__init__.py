"""The HTTP fault layer: one process in the network path of every link of the stack.

It records every request and answer of every link into the History and applies the semantic
faults (status codes, bad logprobs, prefix drift, broken bodies, hangs, one trajectory failing)
from outside the servers, so they work the same against real vLLM, real NeMo Gym, a server a
user started, or ours. Toxiproxy sits in front of it on each link (client -> Toxiproxy -> this
layer -> server), so TCP faults act on the client's own connection.
"""
