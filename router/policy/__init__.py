"""Routing policies: small typed classes with one scoring method, and their registry.

Serving needs only what is exported here; the training and evaluation are :mod:`router.training`,
off the request path.
"""

from .classifier import ComplexityClassifier, load_classifier
from .config import RoutingSettings
from .features import Decision, Features, Hint, Policy
from .policies import build_policy
from .privacy import PrivacyDetector
from .rules import decide
from .speed import SpeedModels

__all__ = [
    "ComplexityClassifier",
    "Decision",
    "Features",
    "Hint",
    "Policy",
    "PrivacyDetector",
    "RoutingSettings",
    "SpeedModels",
    "build_policy",
    "decide",
    "load_classifier",
]
