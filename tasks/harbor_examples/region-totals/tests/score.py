"""Runs each test of test_outputs.py and writes the share that passed as the reward."""

import importlib.util
import json
import traceback

spec = importlib.util.spec_from_file_location("test_outputs", "/tests/test_outputs.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
tests = [getattr(module, name) for name in sorted(dir(module)) if name.startswith("test_")]
passed = 0
for test in tests:
    try:
        test()
        passed += 1
        print(f"PASSED {test.__name__}")
    except Exception:  # noqa: BLE001 - a failing test scores nothing
        print(f"FAILED {test.__name__}")
        traceback.print_exc()
with open("/logs/verifier/reward.json", "w") as out:
    json.dump({"reward": passed / len(tests), "regions_right": passed}, out)
