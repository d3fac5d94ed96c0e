"""Every link a reader can follow in README.md and docs/ resolves inside the
repository: relative Markdown links name a file that exists (and, with a
#fragment into a Markdown file, a heading there), and every docs/... path
written in the text names a file that exists. A fresh clone is all a reader
has, so nothing may point outside it (../shared, absolute paths)."""

import os
import re
import unittest

SRC = os.path.realpath(os.environ.get(
    "SUPERSERVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../..")))

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PATH_IN_TEXT = re.compile(r"(?<![\w/.-])docs/[\w./*-]*[\w*]")


def markdown_files():
    yield os.path.join(SRC, "README.md")
    for root, _, files in os.walk(os.path.join(SRC, "docs")):
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.join(root, f)


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    found, in_code = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("#"):
                found.add(slug(line.lstrip("#")))
    return found


class LinksTest(unittest.TestCase):
    def test_relative_links_resolve_inside_the_repository(self):
        broken = []
        for md in markdown_files():
            with open(md, encoding="utf-8") as f:
                text = f.read()
            for target in LINK.findall(text):
                if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                    continue
                path, _, fragment = target.partition("#")
                where = md if path == "" else os.path.realpath(
                    os.path.join(os.path.dirname(md), path))
                rel = os.path.relpath(md, SRC)
                if not where.startswith(SRC + os.sep):
                    broken.append(f"{rel}: {target} points outside the repository")
                elif not os.path.exists(where):
                    broken.append(f"{rel}: {target} does not exist")
                elif fragment and where.endswith(".md") and fragment not in anchors(where):
                    broken.append(f"{rel}: {target} names no heading of {os.path.relpath(where, SRC)}")
        self.assertEqual(broken, [], "\n".join(broken))

    def test_docs_paths_in_the_text_exist(self):
        missing = []
        for md in markdown_files():
            with open(md, encoding="utf-8") as f:
                lines = f.readlines()
            for n, line in enumerate(lines, 1):
                for path in PATH_IN_TEXT.findall(line):
                    if re.search(r"NAME|\*|<|\.\.\.", path) or path.startswith("docs/docs/"):
                        continue  # a pattern, not a file
                    if not os.path.exists(os.path.join(SRC, path.rstrip("."))):
                        missing.append(f"{os.path.relpath(md, SRC)}:{n}: {path}")
        self.assertEqual(missing, [], "\n".join(missing))

    def test_nothing_points_at_the_shared_folder(self):
        offenders = []
        for md in markdown_files():
            with open(md, encoding="utf-8") as f:
                lines = f.readlines()
            for n, line in enumerate(lines, 1):
                if "../shared" in line:
                    offenders.append(f"{os.path.relpath(md, SRC)}:{n}")
        self.assertEqual(offenders, [], "\n".join(offenders))


if __name__ == "__main__":
    unittest.main()
