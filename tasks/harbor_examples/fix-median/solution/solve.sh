#!/bin/bash
# The oracle: the even-length case averages the two middle values.
cd /app
python3 - <<'EOF'
from pathlib import Path
path = Path("stats.py")
text = path.read_text()
text = text.replace(
    "    return ordered[middle]\n",
    "    if len(ordered) % 2:\n        return ordered[middle]\n    return (ordered[middle - 1] + ordered[middle]) / 2\n",
)
path.write_text(text)
EOF
