"""Routing policies: small typed classes with one scoring method, and their registry.

Serving needs only what is exported here; the training and evaluation are :mod:`router.training`,
off the request path.
"""

from .classifier import ComplexityClassifier, load_classifier
from .config import PrivateRule, RoutingSettings
from .features import Decision, Features, Hint, Policy, features_from_dict
from .policies import ComplexityPolicy, HybridPolicy, LengthPolicy, build_policy
from .privacy import PrivacyDetector, luhn_valid
from .rules import decide
from .speed import Prediction, SideModel, SpeedModels, TimeModel

__all__ = [
    "ComplexityClassifier",
    "ComplexityPolicy",
    "Decision",
    "Features",
    "Hint",
    "HybridPolicy",
    "LengthPolicy",
    "Policy",
    "PrivacyDetector",
    "Prediction",
    "PrivateRule",
    "RoutingSettings",
    "SideModel",
    "SpeedModels",
    "TimeModel",
    "build_policy",
    "decide",
    "features_from_dict",
    "load_classifier",
    "luhn_valid",
]
