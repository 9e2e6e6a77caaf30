"""Print one of README.md's set-up commands, so CI runs exactly what a newcomer copies.

The README marks each command with an HTML comment on the line before its
code block: ``<!-- command: lab -->`` or ``<!-- command: test -->``.
"""

import re
import sys
from pathlib import Path

name = sys.argv[1]
text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
match = re.search(rf"<!-- command: {name} -->\s*```(?:bash|sh)?\n(.*?)```", text, re.S)
if match is None:
    sys.exit(f"README.md has no block marked <!-- command: {name} -->")
print(match.group(1).strip())
