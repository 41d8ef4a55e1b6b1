"""The user docs stay product docs: no development history, a short README, links that resolve.

README.md, CHANGELOG.md and docs/*.md say what the node does and what it measures now; how a
figure was reached lives in git history. So they never name a numbered working round ("stop 16")
or an issue number ("issue 11's table"), and every relative link and anchor points somewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOP = [REPO / "README.md", REPO / "CHANGELOG.md"]
DOCS = [p for p in TOP if p.exists()] + sorted((REPO / "docs").glob("*.md"))
README_MAX_LINES = 250

# Product words that look alike stay allowed: "stop sequences", "up to 4 stop strings",
# "stop_type", "3 rounds" of a bench, "round robin".
HISTORY = [
    re.compile(r"\bstops?\s+\d+", re.IGNORECASE),  # "stop 16", "stops 16-20"
    re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE),  # "issue 11's table", "issues 11-14"
    re.compile(r"#\d+\b"),  # "#12"
    re.compile(r"\bround\s+\d+", re.IGNORECASE),  # "round 2"
    re.compile(
        r"\b(?:this|that)\s+(?:stop|issue)\b(?!\s+(?:sequence|string|word|token|matcher))", re.IGNORECASE
    ),
    re.compile(r"\bthe\s+issue\b", re.IGNORECASE),  # "the table" 
    re.compile(
        r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))\s+look\b",
        re.IGNORECASE,
    ),
]

FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def history_mentions(text: str) -> list[str]:
    """Each phrase of `text` that names a working round or an issue number."""
    return [m.group(0) for pattern in HISTORY for m in pattern.finditer(text)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub makes for the headings of a Markdown file (repeats get -1, -2...)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """The relative links of `path` whose file or anchor does not exist."""
    bad = []
    for target in LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no heading makes #{anchor})")
    return bad


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_development_history(path: Path) -> None:
    assert history_mentions(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_readme_is_short() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES


@pytest.mark.parametrize(
    "text",
    [
        "Stop 16, idle box: healthz 0.40 / 0.64",
        "the model shipped before it (stops 16-20)",
        "node before continuous batching (issue 11's table)",
        "echo, rerun after issue 14 (load 4)",
        "after issues 11-14 landed on main",
        "see #12",
        "Round 2 of the calibration",
        "(stop 28, tenth look at the test part)",
        "This is the 5th look at it",
        "as this stop measured",
        "what the issue's table showed",
    ],
)
def test_history_is_caught(text: str) -> None:
    assert history_mentions(text) != []


@pytest.mark.parametrize(
    "text",
    [
        "more than 4 stop sequences (OpenAI's bound)",
        "take up to 32 stop strings",
        "the stop sequence that ended its answer",
        "`stop_type` is `word` when the stop string ended it",
        "`python -m bench.reliability`, 3 rounds each",
        "ties round robin (the one served longest ago)",
        "One request, stop by stop",
        "models.stops (the stop matcher)",
        "this stop sequence ends the answer",
        "the first round is the node's lowest",
        "an issue with the member's connection",
    ],
)
def test_product_words_pass(text: str) -> None:
    assert history_mentions(text) == []


def test_slug_matches_github() -> None:
    assert slug("Memory of a default node: `python -m bench.memory`") == (
        "memory-of-a-default-node-python--m-benchmemory"
    )
    assert slug("Keys: tenants and operators") == "keys-tenants-and-operators"
    assert slug("Access: operators only") == "access-operators-only"
