#!/bin/bash
cd /app
python3 - <<'EOF'
import csv, json
totals = {}
with open("sales.csv") as f:
    for row in csv.DictReader(f):
        totals[row["region"]] = round(totals.get(row["region"], 0) + float(row["amount"]), 2)
with open("totals.json", "w") as out:
    json.dump(totals, out)
EOF
