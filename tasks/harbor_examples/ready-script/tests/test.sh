#!/bin/bash
# A shell-only verifier (no Python test file, so no canary twin can be built of it).
cd /app
if [ -x ./run.sh ] && [ "$(./run.sh)" = "ready" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
