"""The offline training and evaluation of the cache verifier and the routing policy, off the request
path (an import-linter contract holds it): only the command line, the benchmarks and the tests import it."""
