import unittest

from layered import Config, deep_merge, merge_all
from layered.merge import DELETE


class MergeTests(unittest.TestCase):
    def test_nested_merge(self):
        self.assertEqual(
            deep_merge({"db": {"host": "localhost", "port": 5432}, "debug": False}, {"db": {"port": 6543}}),
            {"db": {"host": "localhost", "port": 6543}, "debug": False},
        )

    def test_lists_are_replaced(self):
        self.assertEqual(deep_merge({"tags": [1, 2]}, {"tags": [3]}), {"tags": [3]})

    def test_scalar_replaces_mapping_and_back(self):
        self.assertEqual(deep_merge({"a": {"x": 1}}, {"a": 5}), {"a": 5})
        self.assertEqual(deep_merge({"a": 5}, {"a": {"x": 1}}), {"a": {"x": 1}})

    def test_delete(self):
        self.assertEqual(deep_merge({"a": 1, "b": {"c": 2, "d": 3}}, {"a": DELETE, "b": {"c": DELETE}}), {"b": {"d": 3}})

    def test_inputs_not_modified(self):
        base = {"db": {"host": "a"}}
        override = {"db": {"port": 1}}
        deep_merge(base, override)
        self.assertEqual((base, override), ({"db": {"host": "a"}}, {"db": {"port": 1}}))

    def test_merge_all(self):
        self.assertEqual(merge_all({"a": 1}, None, {"b": {"c": 2}}, {"b": {"c": 3}}), {"a": 1, "b": {"c": 3}})


class ConfigTests(unittest.TestCase):
    def test_get(self):
        cfg = Config({"db": {"host": "localhost"}}, {"db": {"port": 5432}})
        self.assertEqual(cfg.get("db.port"), 5432)
        self.assertEqual(cfg.get("db.user", "nobody"), "nobody")
        with self.assertRaises(KeyError):
            cfg.get("db.user")
        self.assertIn("db.host", cfg)
        self.assertNotIn("cache", cfg)

    def test_set_creates_sections(self):
        cfg = Config()
        cfg.set("a.b.c", 1)
        self.assertEqual(cfg.as_dict(), {"a": {"b": {"c": 1}}})

    def test_from_json(self):
        cfg = Config.from_json({"log": {"level": "info", "file": None}}, '{"log": {"level": "debug"}}')
        self.assertEqual(cfg.as_dict(), {"log": {"level": "debug", "file": None}})
        with self.assertRaises(ValueError):
            Config.from_json({}, "[1, 2]")

    def test_keys(self):
        cfg = Config({"a": {"b": 1, "c": {}}, "d": 2})
        self.assertEqual(sorted(cfg.keys()), ["a.b", "a.c", "d"])


if __name__ == "__main__":
    unittest.main()
