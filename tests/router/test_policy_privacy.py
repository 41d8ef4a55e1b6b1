"""Private-request detection: e-mail, Luhn-checked card numbers, phone numbers, the explicit flag."""

from __future__ import annotations

import pytest

from router.errors import ConfigError
from router.policy import PrivacyDetector, RoutingSettings
from router.policy.config import PrivateRule
from router.policy.privacy import luhn_valid
from router.settings import load_settings

DETECT = PrivacyDetector.from_settings(RoutingSettings())


@pytest.mark.parametrize(
    ("digits", "valid"),
    [
        ("4111111111111111", True),
        ("4111111111111112", False),
        ("79927398713", True),
        ("5555555555554444", True),
    ],
)
def test_luhn(digits: str, valid: bool) -> None:
    assert luhn_valid(digits) is valid


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("mail me at jane.doe@example.com please", "email"),
        ("Contact: first+tag@sub.mail.co.uk.", "email"),
        ("my card is 4111 1111 1111 1111, exp 12/27", "card"),
        ("charge 5555-5555-5555-4444 now", "card"),
        ("card 4111111111111111", "card"),
        ("call +1 415 555 0132 tomorrow", "phone"),
        ("my number is (415) 555-0132", "phone"),
        ("ring 415-555-0132", "phone"),
        ("UK office: +44 20 7946 0958", "phone"),
        ("whatsapp +4915112345678", "phone"),
    ],
)
def test_default_rules_catch_personal_data(text: str, rule: str) -> None:
    assert DETECT.detect(text) == rule


@pytest.mark.parametrize(
    "text",
    [
        "What is 15% of 200?",
        "The meeting is on 2024-01-15 at 10:30.",
        "pi is about 3.14159265",
        "upgrade from version 1.2.3 to 1.10.0",
        "Order 12345 shipped; invoice 2024/0042.",
        "Solve 3x + 2y = 16 and x - y = 2",
        "card 4111 1111 1111 1112 fails the checksum",  # Luhn-invalid: not a card
        "Write 1,250,000 in words.",
        "email me @ the usual place",
        "A train leaves at 60 mph and another at 80 mph; the cities are 790 miles apart.",
    ],
)
def test_default_rules_leave_ordinary_prompts_alone(text: str) -> None:
    assert DETECT.detect(text) is None


def test_flag_wins_without_looking_at_the_text() -> None:
    assert DETECT.detect("hello", flag=True) == "flag"


def test_detection_can_be_disabled_but_the_flag_still_counts() -> None:
    off = PrivacyDetector.from_settings(RoutingSettings(private_detection=False))
    assert off.detect("jane.doe@example.com") is None
    assert off.detect("jane.doe@example.com", flag=True) == "flag"


def test_custom_rules_replace_the_defaults() -> None:
    settings = RoutingSettings(private_rules=[PrivateRule(name="employee-id", pattern=r"\bEMP-\d{6}\b")])
    custom = PrivacyDetector.from_settings(settings)
    assert custom.detect("ticket for EMP-004211") == "employee-id"
    assert custom.detect("jane.doe@example.com") is None


def test_invalid_regex_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEROUTE_ROUTING__PRIVATE_RULES", '[{"name": "bad", "pattern": "(unclosed"}]')
    with pytest.raises(ConfigError, match="invalid regular expression"):
        load_settings()


def test_no_prompt_of_the_shipped_set_looks_private() -> None:
    from router.training.dataset import load_prompts

    assert [p.text for p in load_prompts() if DETECT.detect(p.text)] == []


@pytest.mark.parametrize("offset", [-40, -20, -10, -5, -1, 0, 1, 5])
@pytest.mark.parametrize(
    ("secret", "rule"),
    [("jane.doe@example.com", "email"), ("4111 1111 1111 1111", "card"), ("(415) 555-0132", "phone")],
)
def test_a_match_across_a_search_window_boundary_is_found(secret: str, rule: str, offset: int) -> None:
    from router.policy.privacy import _OVERLAP, _WINDOW

    # A long prompt is searched in windows [k W, (k + 1) W + overlap); the secret straddles (or
    # touches) a window's end (cut there: the next window must find it whole) or the next
    # window's start (found whole in the earlier window).
    for edge in (_WINDOW, _WINDOW + _OVERLAP, 2 * _WINDOW, 2 * _WINDOW + _OVERLAP):
        lead = edge + offset
        text = "word " * (lead // 5) + "x" * (lead % 5)
        text = text[:-1] + " " + secret + " and " + "more words " * 3000
        assert DETECT.detect(text) == rule, (edge, offset)


def test_a_card_number_cut_by_a_window_end_is_not_taken_for_its_prefix() -> None:
    from router.policy.privacy import _OVERLAP, _WINDOW

    # 4111 1111 1111 9123 fails the Luhn check; its first 13 digits (4111111111119) pass it.
    # Placed so the first window's end cuts it right after those 13 digits: only the whole
    # number may decide.
    number = "4111 1111 1111 9123"
    start = _WINDOW + _OVERLAP - len("4111 1111 1111 9")
    text = "a" * (start - 1) + " " + number + " " + "b " * 5000
    assert DETECT.detect(text) is None
    assert DETECT.detect(text.replace(number, "4111 1111 1111 1111")) == "card"
