"""Routing policies: small typed classes with one scoring method, and their registry.

Serving needs only what is exported here; training and evaluation (``train``, ``embed``,
``evaluate``) are imported by the ``edgeroute router`` commands alone.
"""

from .calibrate import Calibration, logged_scores, threshold_for_share
from .classifier import ComplexityClassifier, load_classifier
from .config import PrivateRule, RoutingSettings
from .features import Decision, Features, Hint, Policy, Target, features_from_dict, features_to_dict
from .policies import POLICIES, ComplexityPolicy, HybridPolicy, LengthPolicy, build_policy
from .privacy import PrivacyDetector, luhn_valid
from .rules import decide, edge_saturated
from .replay import CostModel, LoggedDecision, ReplayReport, read_decisions_db, replay

__all__ = [
    "POLICIES",
    "Calibration",
    "ComplexityClassifier",
    "ComplexityPolicy",
    "CostModel",
    "Decision",
    "Features",
    "Hint",
    "HybridPolicy",
    "LengthPolicy",
    "LoggedDecision",
    "Policy",
    "PrivacyDetector",
    "PrivateRule",
    "ReplayReport",
    "RoutingSettings",
    "Target",
    "build_policy",
    "decide",
    "edge_saturated",
    "features_from_dict",
    "features_to_dict",
    "load_classifier",
    "logged_scores",
    "luhn_valid",
    "read_decisions_db",
    "replay",
    "threshold_for_share",
]
