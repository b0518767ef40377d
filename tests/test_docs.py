"""The docs a newcomer reads: README.md (an overview) and one page per topic in docs/.

Checked here, without TensorFlow: relative links and their #anchors resolve, no
machine-specific path appears, the README stays short with a two-command Quickstart,
every command of `tfparity --help` has a row in the README's table and a page, and
CHANGELOG.md is versioned, its newest release being the package's version.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CHANGELOG = ROOT / "CHANGELOG.md"
PAGES = [README, CHANGELOG, *sorted(DOCS.glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
MACHINE_PATHS = ("site-packages", "/home/", "/root/", "/work/", "/tmp/")
RELEASE = re.compile(r"\[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})")


def prose(text: str) -> str:
    """The text outside fenced code blocks (links in code are not links)."""
    return FENCE.sub("", text)


def links(text: str) -> list[str]:
    return LINK.findall(CODE_SPAN.sub("", prose(text)))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(prose(path.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    bad = []
    for target in links(page.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no heading #{anchor} in {dest.name})")
    return bad


def quickstart_commands(text: str) -> list[str]:
    section = re.split(r"^## Quickstart\s*$", text, maxsplit=1, flags=re.M)
    assert len(section) == 2, "README.md has no '## Quickstart' section"
    body = re.split(r"^## ", section[1], maxsplit=1, flags=re.M)[0]
    blocks = re.findall(r"^```bash\n(.*?)^```", body, re.S | re.M)
    assert len(blocks) == 1, f"the Quickstart holds {len(blocks)} ```bash blocks, not one"
    return [line for line in blocks[0].splitlines() if line.strip() and not line.startswith("#")]


def commands() -> list[str]:
    """The subcommands `tfparity --help` lists (argparse's own table)."""
    import argparse

    from tfparity.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def command_rows(text: str) -> dict[str, str]:
    """README table rows whose first cell names a command: `tfparity NAME`."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("|"):
            first = line.split("|")[1]
            found = re.search(r"`tfparity ([a-z-]+)`", first)
            if found:
                rows[found.group(1)] = line
    return rows


def test_docs_exist():
    assert (DOCS / "index.md").is_file()
    assert len(PAGES) > 10


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_machine_paths(page):
    text = page.read_text()
    found = [
        f"line {n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        if any(p in line for p in MACHINE_PATHS)
    ]
    assert found == [], f"machine-specific paths in {page.name} (use the spec or <dir>)"


def test_every_docs_page_is_linked_from_the_index():
    index = (DOCS / "index.md").read_text()
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in links(index)}
    missing = [p.name for p in DOCS.glob("*.md") if p.name != "index.md" and p not in linked]
    assert missing == []


def test_readme_is_short_with_a_two_command_quickstart():
    text = README.read_text()
    assert len(text.splitlines()) < 250
    quickstart = quickstart_commands(text)
    assert len(quickstart) == 2, quickstart
    assert quickstart[0].endswith("tfparity check")
    ci = (ROOT / ".ci" / "run").read_text()
    assert quickstart[1] in ci.splitlines(), ".ci/run must run the second command verbatim"


def test_every_command_has_a_readme_row_and_a_page():
    rows = command_rows(README.read_text())
    names = commands()
    assert set(names) >= {"check", "crosscheck", "sweep"}
    for name in names:
        assert name in rows, f"`tfparity {name}` has no row in the README's command table"
        pages = [t for t in links(rows[name]) if t.startswith("docs/")]
        assert pages, f"the README row of `tfparity {name}` links to no page under docs/"
        page = ROOT / pages[0].partition("#")[0]
        assert page.is_file(), f"{pages[0]} does not exist"
        named = re.search(rf"tfparity {re.escape(name)}(?![\w-])", page.read_text())
        assert named, f"{page.name} never names `tfparity {name}`"


def changelog_problems(text: str, version: str) -> list[str]:
    """What keeps ``text`` from being a versioned changelog (Keep a Changelog) whose
    newest release is ``version``: every ``## `` heading is ``[Unreleased]`` (first, once)
    or ``[X.Y.Z] - YYYY-MM-DD``, releases newest first, at least one."""
    headings = re.findall(r"^## (.*?)\s*$", prose(text), re.M)
    problems = []
    if not headings or headings[0] != "[Unreleased]":
        problems.append(f"the first section is {headings[:1]}, not '## [Unreleased]'")
    unreleased = [h for h in headings if "unreleased" in h.lower()]
    if len(unreleased) > 1:
        problems.append(f"{len(unreleased)} Unreleased sections: {unreleased}")
    releases = []
    for heading in headings:
        if "unreleased" in heading.lower():
            continue
        found = RELEASE.fullmatch(heading)
        if not found:
            problems.append(f"'## {heading}' is not '## [X.Y.Z] - YYYY-MM-DD'")
            continue
        try:
            date = datetime.date.fromisoformat(found.group(4))
        except ValueError:
            problems.append(f"'## {heading}': no such date")
            continue
        releases.append((tuple(int(n) for n in found.group(1, 2, 3)), date, heading))
    if not releases:
        problems.append("no released version: a '## [X.Y.Z] - YYYY-MM-DD' section")
    for (v1, d1, h1), (v2, d2, h2) in zip(releases, releases[1:], strict=False):
        if not (v1 > v2 and d1 >= d2):
            problems.append(f"'## {h1}' comes before '## {h2}': newest first")
    newest = ".".join(map(str, releases[0][0])) if releases else version
    if newest != version:
        problems.append(f"the newest release is {newest}, but tfparity.__version__ is {version}")
    return problems


def test_changelog_is_versioned_at_the_package_version():
    import tfparity

    assert changelog_problems(CHANGELOG.read_text(), tfparity.__version__) == []


@pytest.mark.parametrize(
    ("text", "version", "expected"),
    [
        ("## [Unreleased]\n## [0.2.0] - 2026-12-01\n", "0.2.0", []),
        ("## [Unreleased]\n## [0.2.0] - 2026-12-01\n", "0.1.0", ["tfparity.__version__ is 0.1.0"]),
        ("## [0.2.0] - 2026-12-01\n", "0.2.0", ["not '## [Unreleased]'"]),
        ("## [Unreleased]\n## Unreleased\n## [0.2.0] - 2026-12-01\n", "0.2.0", ["2 Unreleased"]),
        ("## [Unreleased]\n", "0.2.0", ["no released version"]),
        ("## [Unreleased]\n## [0.2.0]\n", "0.2.0", ["is not '## [X.Y.Z]", "no released"]),
        ("## [Unreleased]\n## [0.2.0] - 2026-13-01\n", "0.2.0", ["no such date", "no released"]),
        (
            "## [Unreleased]\n## [0.1.0] - 2026-11-30\n## [0.2.0] - 2026-12-01\n",
            "0.1.0",
            ["newest first"],
        ),
    ],
)
def test_changelog_problems_are_found(text, version, expected):
    problems = changelog_problems(text, version)
    assert len(problems) == len(expected), problems
    for problem, part in zip(problems, expected, strict=True):
        assert part in problem


def test_the_readme_counts_the_registered_tf_architectures():
    """The README's "N Hugging Face TF text architectures" is the registry's number of
    model types with a transformers TF class (the registry imports no framework)."""
    from tfparity.architectures import registry

    found = re.findall(
        r"(\d+) Hugging Face TF text architectures", " ".join(README.read_text().split())
    )
    assert len(found) == 1, found
    registered = [t for t, a in registry().items() if a.tf_class is not None]
    assert int(found[0]) == len(registered), f"the README says {found[0]}: {len(registered)} are"
