"""The offline training and evaluation, off the request path (an import-linter contract holds it):
the cache verifier's fine-tuning and calibration (``verifier``, ``finetune``), and the routing
policy's classifier training, evaluation, threshold calibration and replay of logged decisions
(``train``, ``evaluate``, ``calibrate``, ``replay``, on ``dataset`` and ``embed``).

Only the command line (``edgeroute cache calibrate|train-verifier``, ``edgeroute router ...``), the
benchmarks and the tests import it, each module on its own.
"""
